// SPDX-License-Identifier: Apache-2.0
// A dispatch backend: one type per folder under dispatch/backends/ (opencl, clblast, host), listed
// once in registry.cpp. A backend owns everything the dispatcher, the tuner and the tuning
// database need to know about it: its implementations of an op (each with supports() and its
// refusal reason), its config schema and reader, its pretune candidates, and the hash of the
// sources that decide a tuned row's speed. Nothing outside the registry compares backend names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dispatch/config/vendor_profile.hpp"
#include "kernels/op_descriptor.hpp"

namespace prism::dispatch {

/// One pretune candidate: a backend and a config for it.
struct candidate {
  std::string backend;
  std::string config;  ///< canonical text for that backend ("" = its default)
  std::string origin;  ///< "tune_configs.yaml", "clblast Xgemm", ...
};

enum class strategy { exhaustive, random };

/// Unless listed, host is a pretune candidate only on CPU devices and only for calls whose
/// default route takes at least this long (docs/tuning.md, "When host is a candidate").
inline constexpr double host_min_default_ns = 1e6;

/// What pretune asks of every backend's candidate generator.
struct candidate_options {
  /// Backends the user listed (empty = all that serve the op, each by its own policy).
  std::vector<std::string> backends;
  /// The measured p50 of the shape's default route (0 = not measured).
  double default_ns = 0;
  strategy pick = strategy::random;
  std::size_t max_per_backend = 0;  ///< random: at most this many generated configs per backend
  std::uint64_t seed = 1;

  /// True when `backend` was named in `backends`.
  bool lists(std::string_view backend) const;
};

/// The vendor profile that applies to a device, with the set it came from (for the generic
/// fallback of tune spaces). `profile` may be null: no profile matched.
struct vendor_context {
  const vendor_set* set = nullptr;
  const vendor_profile* profile = nullptr;
  /// The op's opencl default and search space: the profile's own, else the generic profile's,
  /// else the schema default.
  const tune_space& tune_space_of(const op_descriptor& d) const;
  /// The profile's replacement text for a kernels/cl file, or null.
  const kernel_override* kernel(const std::string& kernel_file) const;
  std::string name() const { return profile ? profile->name : std::string(); }
};

class backend {
 public:
  virtual ~backend() = default;
  virtual const char* name() const noexcept = 0;
  /// Its implementations of `d` in preference order; empty when it does not serve the op.
  virtual std::vector<op_implementation> implementations(const op_descriptor& d) const = 0;
  /// Reads a config for `d`: "" is the backend's default under the vendor profile. Returns it
  /// complete; throws errc::config_error naming the op, the backend, the text and what is valid.
  virtual kernel_config read_config(const op_descriptor& d, const std::string& text,
                                    const vendor_context& vendor) const = 0;
  /// Pretune's candidate configs for `d` on `dev` (empty when the backend's policy declines).
  virtual std::vector<candidate> candidates(const device& dev, const op_descriptor& d, dtype type,
                                            const vendor_context& vendor,
                                            const candidate_options& options) const = 0;
  /// Folds into `h` what decides a tuned row's speed besides the device and the config (kernel
  /// sources, library version): rows whose hash changes are stale.
  virtual std::uint64_t source_hash(const op_descriptor& d, const vendor_context& vendor,
                                    std::uint64_t h) const = 0;
};

/// Every backend, in built-in preference order; the last serves every op (backend of last
/// resort). Thread safety: immutable after first use.
const std::vector<const backend*>& backend_registry();
/// The backend named `name`, or null.
const backend* find_backend(std::string_view name);
/// The backend named `name`; throws errc::not_found naming `what` and listing the valid names.
const backend& backend_named(std::string_view name, const std::string& what);

/// The backends each registered backend folder defines (registry.cpp lists them).
const backend& opencl_backend();
const backend& clblast_backend();
const backend& host_backend();

}  // namespace prism::dispatch
