// Pretune candidates for one op on one device: the opencl configs of the vendor's
// tune_configs.yaml (explicit + generated), CLBlast parameter sets (Xgemm, XgemmDirect, and the
// direct/indirect switch), the host backend, and always the untuned default route.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op_descriptor.hpp"

namespace prism::dispatch::tuner {

struct candidate {
  std::string backend;
  std::string config;  ///< canonical text for that backend ("" = its default)
  std::string origin;  ///< "tune_configs.yaml", "clblast Xgemm", "default route", ...
};

enum class strategy { exhaustive, random };

/// With no backend list, host is a candidate only on CPU devices and only for calls whose default
/// route takes at least this long (docs/tuning.md, "When host is a candidate").
inline constexpr double host_min_default_ns = 1e6;

struct candidate_options {
  /// Allowed backends (empty = all the op has; host only as `host_min_default_ns` says).
  std::vector<std::string> backends;
  /// The measured p50 of the shape's default route (0 = not measured): decides host above.
  double default_ns = 0;
  strategy pick = strategy::random;
  std::size_t max_per_backend = 0;  ///< random: at most this many per backend (0 = no cap)
  std::uint64_t seed = 1;
};

/// The opencl configs pretune tries: every config of the vendor's tune_configs.yaml space
/// (default first), then configs generated around them: each parameter the file varies is
/// stepped through its allowed values (schema-valid only; random strategy: at most
/// max_per_backend of them).
struct opencl_space {
  std::string vendor;  ///< the profile the space came from
  std::vector<std::string> explicit_configs;
  std::vector<std::string> generated;
};
opencl_space opencl_configs(const op_descriptor& d, const std::string& vendor,
                            const candidate_options& options);

/// Candidate list for `d` on `dev` (vendor = the matched profile name), deduplicated, in a
/// stable order. The default route itself is added by the tuner, not here.
std::vector<candidate> make_candidates(const device& dev, const op_descriptor& d, dtype type,
                                       const std::string& vendor, const candidate_options& options);

/// The CLBlast GEMM parameter sets tried per shape (each valid for the device's local memory
/// and work-group limits): Xgemm sets forced indirect, XgemmDirect sets forced direct.
std::vector<std::string> clblast_parameter_sets(const device& dev, dtype type);

}  // namespace prism::dispatch::tuner
