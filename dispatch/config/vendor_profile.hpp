// SPDX-License-Identifier: Apache-2.0
// The one vendor loader. A vendor profile is a folder, read whole at start-up into one value:
// vendor.yaml (match rules, default routes, unused ops), tune_configs.yaml (default configs and
// search spaces, parsed by the kernels layer from the text handed to it) and kernels/<file>.cl
// (replacing the prism kernel file of the same name). Data only: adding a device family needs
// no C++ change.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/config/routes_file.hpp"
#include "kernels/op_descriptor.hpp"

namespace prism::dispatch {

/// What a profile's match rules look at (from prism::device; plain strings so tests need none).
struct device_description {
  std::string platform_name;
  std::string vendor;
  std::string type;  ///< "cpu", "gpu", "accelerator", "other"
  std::string name;
};

/// A vendor's replacement of one kernels/cl file.
struct kernel_override {
  std::string path;  ///< where it was read from
  std::string text;
};

struct vendor_profile {
  std::string name;
  std::string directory;
  int priority = 0;  ///< among matching profiles the highest wins; ties: the one loaded last
  /// field ("platform_name", "device_vendor", "device_type", "device_name") -> glob patterns
  /// (case-insensitive, '*' and '?'). Every listed field must match one of its patterns.
  std::map<std::string, std::vector<std::string>> match;
  std::map<std::string, file_route> routes;   ///< op -> backend (origin "<vendor.yaml>:<line>")
  std::map<std::string, std::string> unused;  ///< op -> origin
  /// kernel file name ("binary.cl", as op_implementation::kernel_file) -> its override
  std::map<std::string, kernel_override> kernels;
  /// op -> its entry of tune_configs.yaml (validated against the op registry at load)
  std::map<std::string, tune_space> tune_spaces;
  std::string tune_file;  ///< the tune_configs.yaml read ("" when the folder has none)

  bool matches(const device_description& d) const;
  std::string match_summary() const;  ///< "device_type=cpu; platform_name=*pocl*"
};

/// Every loaded profile, and the answers that need more than one of them.
/// Thread safety: immutable after construction.
class vendor_set {
 public:
  vendor_set() = default;
  explicit vendor_set(std::vector<vendor_profile> profiles) : profiles_(std::move(profiles)) {}
  const std::vector<vendor_profile>& profiles() const noexcept { return profiles_; }
  const vendor_profile* find(const std::string& name) const;
  /// The op's opencl default and search space under `p`: p's tune_configs.yaml entry, else the
  /// "generic" profile's, else the schema default alone. A reference into the set (or the
  /// process-wide schema spaces): dispatch reads a forced call's default config through it on
  /// every call, and a GEMM space holds hundreds of configs.
  const tune_space& tune_space_of(const op_descriptor& d, const vendor_profile* p) const;

 private:
  std::vector<vendor_profile> profiles_;
};

/// Loads one profile folder whole (vendor.yaml, tune_configs.yaml, kernels/). Throws
/// errc::config_error with file and line for malformed files, unknown keys or fields, unknown
/// ops and invalid configs; errc::io_error for unreadable files.
vendor_profile load_vendor_profile(const std::string& dir);

/// Loads every profile under `dirs`, in order. Each entry is either one profile folder (it
/// holds vendor.yaml) or a folder of profile folders. A later profile with the same name
/// replaces an earlier one (PRISM_VENDOR_PATH comes after the shipped profiles).
std::vector<vendor_profile> load_vendor_profiles(const std::vector<std::string>& dirs);

/// The shipped profiles (<data dir>/vendors) followed by those under `extra_dirs`
/// (PRISM_VENDOR_PATH): what the dispatcher and every tool use.
vendor_set load_vendors(const std::vector<std::string>& extra_dirs);

/// The profile for `d`: the one named `forced` (errc::not_found listing the loaded names when
/// absent), else the highest-priority match; nullptr when none matches.
const vendor_profile* select_vendor(const std::vector<vendor_profile>& profiles, const device_description& d,
                                    const std::string& forced);

/// Case-insensitive glob match ('*' any run, '?' one character).
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace prism::dispatch
