// SPDX-License-Identifier: Apache-2.0
// The clblast backend's parameter API, used by the dispatcher and by the tuner (pretune): a
// config is a CLBlast parameter set ("KWG=32,MWG=64,...", names from the Xgemm, XgemmDirect and
// GemmRoutine kernels, e.g. XGEMM_MIN_INDIRECT_SIZE for the direct/indirect switch), overlaid
// on CLBlast's own parameters for the device and applied with clblast::OverrideParameters.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernels/gemm_lowering.hpp"
#include "kernels/op_descriptor.hpp"

namespace prism::dispatch::clblast {

/// CLBlast's GEMM kernels and the parameter names each takes.
const std::map<std::string, std::vector<std::string>>& gemm_parameter_names();

/// CLBlast's own parameters (its database entry) for `dev` and f32/f16, as a config with every
/// parameter of every GEMM kernel. Read once per device and precision, before any override.
kernel_config default_parameters(const device& dev, dtype t);

/// Parses and checks a parameter set: known names only (errc::config_error listing them).
/// "" is CLBlast's defaults.
kernel_config parse_parameters(const std::string& text);

/// Why clblast cannot run the lowered GEMM `p` (outputs allocated), or nullopt.
std::optional<std::string> supports(const device& dev, const gemm_problem& p);

/// Runs the lowered GEMM `p` through CLBlast with `params` (partial sets overlay the defaults;
/// empty = the defaults) on `q`, inside prism's dependency tracking. Returns the event of the GEMM.
/// Throws errc::unsupported with supports()'s reason, errc::opencl_error on a CLBlast failure.
/// Re-applies parameters only when they differ from the set last applied for the device and
/// precision. Thread safety: safe (calls are serialised per process around the override).
event run(queue& q, const gemm_problem& p, const kernel_config& params);

/// Parameter switching counters since start: applications (OverrideParameters calls), skips
/// (same set as last time), and the time of the first GEMM after each application (which
/// includes CLBlast's recompilation) versus the other GEMMs, in ms.
struct switch_stats {
  std::uint64_t applied = 0;
  std::uint64_t skipped = 0;
  double first_call_after_apply_ms = 0;  ///< summed over applications
};
switch_stats switching_statistics();

/// The GEMM parameter sets pretune tries per shape (each valid for the device's local memory
/// and work-group limits): Xgemm sets forced indirect, XgemmDirect sets forced direct.
std::vector<std::string> parameter_sets(const device& dev, dtype type);

}  // namespace prism::dispatch::clblast
