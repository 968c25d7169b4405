// Shared by prism_bench_gemm and prism_bench_attention: environment knobs, the one queue, and
// which tune_configs profile applies (PRISM_GEMM_VENDOR overrides it).
#pragma once

#include <cstdlib>
#include <string>

#include "kernels/op_descriptor.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime.hpp"

namespace prism::bench {

/// The variable's value, or nullptr when it is unset or empty.
inline const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

inline queue& bench_queue() {
  static auto* q = new queue();  // never destroyed: no OpenCL from static destructors
  return *q;
}

inline std::string vendor_of(const device& d) {
  if (const char* v = env("PRISM_GEMM_VENDOR")) return v;
  const std::string v = dispatch::matched_vendor(d).name;
  return v.empty() ? "generic" : v;
}

}  // namespace prism::bench
