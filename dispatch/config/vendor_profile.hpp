// Vendor profiles: vendors/<name>/vendor.yaml (match rules, default routes, unused ops) and
// optional vendors/<name>/kernels/<file>.cl replacing the prism kernel file of the same name. Data only:
// adding a device family needs no C++ change (tune_configs.yaml in the same folder is read by the kernels
// layer).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/config/routes_file.hpp"

namespace prism::dispatch {

/// What a profile's match rules look at (from prism::device; plain strings so tests need none).
struct device_description {
  std::string platform_name;
  std::string vendor;
  std::string type;  ///< "cpu", "gpu", "accelerator", "other"
  std::string name;
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
  /// kernel file name ("binary.cl", as op_implementation::kernel_file) -> path of its override
  std::map<std::string, std::string> kernel_files;

  bool matches(const device_description& d) const;
  std::string match_summary() const;  ///< "device_type=cpu; platform_name=*pocl*"
  /// The override text of `kernel_file`, or nullopt when this profile has none. Reads the file
  /// on each call (the dispatcher memoizes it).
  std::optional<std::string> kernel_source(const std::string& kernel_file) const;
};

/// Loads every profile under `dirs`, in order. Each entry is either one profile folder (it
/// holds vendor.yaml) or a folder of profile folders. A later profile with the same name
/// replaces an earlier one (PRISM_VENDOR_PATH comes after the shipped profiles). Throws
/// errc::config_error with file and line for malformed files and unknown keys or fields.
std::vector<vendor_profile> load_vendor_profiles(const std::vector<std::string>& dirs);

/// The profile for `d`: the one named `forced` (errc::not_found listing the loaded names when
/// absent), else the highest-priority match; nullptr when none matches.
const vendor_profile* select_vendor(const std::vector<vendor_profile>& profiles, const device_description& d,
                                    const std::string& forced);

/// Case-insensitive glob match ('*' any run, '?' one character).
bool glob_match(const std::string& pattern, const std::string& text);

}  // namespace prism::dispatch
