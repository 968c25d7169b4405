// SPDX-License-Identifier: Apache-2.0
// What the standalone OpenCL harnesses of benchmarks/gpu (gemm_harness, quant_layout_probe) share:
// the Khronos C++ bindings at OpenCL 1.2 with exceptions, reading a kernel file, and the first
// device of the first platform whose name contains HARNESS_PLATFORM (default NVIDIA).
#pragma once

#define CL_HPP_TARGET_OPENCL_VERSION 120
#define CL_HPP_MINIMUM_OPENCL_VERSION 120
#define CL_HPP_ENABLE_EXCEPTIONS
#include <CL/opencl.hpp>

#include <cstdlib>
#include <fstream>
#include <optional>
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

}  // namespace cl_harness
