// SPDX-License-Identifier: Apache-2.0
// What the standalone OpenCL harnesses of benchmarks/gpu (gemm_harness, quant_layout_probe,
// l2_prefetch_probe, stage_boundary_probe) share: the Khronos C++ bindings at OpenCL 1.2 with
// exceptions, reading a kernel file, the first device of the first platform whose name contains
// HARNESS_PLATFORM (default NVIDIA), integer env knobs, profiled spans and medians.
#pragma once

#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#define CL_HPP_ENABLE_EXCEPTIONS
#include <CL/opencl.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace cl_harness {

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The platform name substring the harness wants (HARNESS_PLATFORM, default NVIDIA).
inline std::string wanted_platform() {
  const char* pf = std::getenv("HARNESS_PLATFORM");
  return pf ? pf : "NVIDIA";
}

// The first device of the first platform whose name contains `want`; nothing when none has one.
inline std::optional<cl::Device> find_device(const std::string& want) {
  std::vector<cl::Platform> platforms;
  cl::Platform::get(&platforms);
  for (auto& p : platforms) {
    if (p.getInfo<CL_PLATFORM_NAME>().find(want) == std::string::npos) continue;
    std::vector<cl::Device> devs;
    p.getDevices(CL_DEVICE_TYPE_ALL, &devs);
    if (!devs.empty()) return devs[0];
    break;
  }
  return std::nullopt;
}

// The HARNESS_PLATFORM device, or nothing after printing that the harness skipped (a probe run
// where the platform is absent succeeds without measuring).
inline std::optional<cl::Device> wanted_device_or_skip() {
  auto dev = find_device(wanted_platform());
  if (!dev) std::printf("no %s device; skipped\n", wanted_platform().c_str());
  return dev;
}

// The integer in env variable `name`, or `fallback` when unset.
inline int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Device µs from profiled event a's start to b's end.
inline double span_us(const cl::Event& a, const cl::Event& b) {
  return (b.getProfilingInfo<CL_PROFILING_COMMAND_END>() - a.getProfilingInfo<CL_PROFILING_COMMAND_START>()) /
         1e3;
}

// A random single cycle over `entries` indices (table[i] is the next): a walk of dependent loads
// that visits every entry, for kernels that must take a fixed time and move few bytes.
inline std::vector<std::uint32_t> dependent_cycle(std::uint32_t entries) {
  std::vector<std::uint32_t> perm(entries), table(entries);
  std::iota(perm.begin(), perm.end(), 0u);
  std::shuffle(perm.begin() + 1, perm.end(), std::mt19937(7));
  for (std::uint32_t i = 0; i < entries; ++i) table[perm[i]] = perm[(i + 1) % entries];
  return table;
}

}  // namespace cl_harness
