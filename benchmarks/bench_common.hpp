// SPDX-License-Identifier: Apache-2.0
// Shared by the benchmarks: environment knobs, the one queue, and the tune_configs space that
// applies, which is the dispatcher's (dispatch::tune_space_for: the matched vendor profile, a
// PRISM_VENDOR_PATH profile's own file included) unless the benchmark's override variable names
// a shipped profile (PRISM_BENCH_VENDOR for the op benchmark, PRISM_GEMM_VENDOR for GEMM and
// attention).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "dispatch/dispatcher.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime.hpp"

namespace prism::bench {

/// The variable's value, or nullptr when it is unset or empty.
inline const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

/// The variable's value as a number, or `fallback` when it is unset or empty.
inline double env_number(const char* name, double fallback) {
  const char* v = env(name);
  return v ? std::atof(v) : fallback;
}

inline queue& bench_queue() {
  static auto* q = new queue();  // never destroyed: no OpenCL from static destructors
  return *q;
}

/// A profiling queue on the benchmark queue's device and context (never destroyed either), for
/// device-time measurements.
inline queue& profiling_queue() {
  static auto* q = [] {
    queue_options o;
    o.enable_profiling = true;
    return new queue(bench_queue().get_context(), o);
  }();
  return *q;
}

/// PRISM_BENCH_GRAPH: calls timed as replayed graphs on the plain queue, by wall time (no queue
/// takes timestamps: NVIDIA's driver spends ~3 us a launch on them).
inline bool graph_timing() {
  static const bool on = env_number("PRISM_BENCH_GRAPH", 0) != 0;
  return on;
}

/// The cache that streamed operands must not fit in: PRISM_BENCH_LLC_BYTES, else the device's
/// CL_DEVICE_GLOBAL_MEM_CACHE_SIZE.
inline std::uint64_t last_level_cache_bytes() {
  if (const char* v = env("PRISM_BENCH_LLC_BYTES")) return std::strtoull(v, nullptr, 10);
  return bench_queue().get_device().global_mem_cache_size();
}

/// The profile name the benchmark uses on `d`: `override_var`'s value, else the matched one.
inline std::string vendor_of(const device& d, const char* override_var) {
  if (const char* v = env(override_var)) return v;
  const std::string v = dispatch::matched_vendor(d).name;
  return v.empty() ? "generic" : v;
}

/// The op's default config and search space on the benchmark's device.
inline tune_space tune_space_of(const op_descriptor& d, const char* override_var) {
  if (const char* v = env(override_var)) return dispatch::vendor_tune_space(d, v);
  return dispatch::tune_space_for(d, bench_queue().get_device());
}

}  // namespace prism::bench
