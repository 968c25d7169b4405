// SPDX-License-Identifier: Apache-2.0
// Internal OpenCL helpers: the one include of the C++ bindings for runtime sources, status
// checks that turn OpenCL failures into prism::error, and typed info queries.
#pragma once

#include "prism/interop/cl_hpp.hpp"

#include <string>
#include <vector>

#include "prism/error.hpp"

namespace prism::detail {

/// Throws prism::error for a failed OpenCL call; allocation failures map to errc::out_of_memory.
[[noreturn]] void throw_cl(cl_int status, const char* operation, const std::string& context_text = {});
inline void check_cl(cl_int status, const char* operation) {
  if (status != CL_SUCCESS) throw_cl(status, operation);
}
inline void check_cl(cl_int status, const char* operation, const std::string& context_text) {
  if (status != CL_SUCCESS) throw_cl(status, operation, context_text);
}

std::string device_info_string(cl_device_id d, cl_device_info what);
std::string platform_info_string(cl_platform_id p, cl_platform_info what);
template <class T>
T device_info(cl_device_id d, cl_device_info what) {
  T v{};
  if (clGetDeviceInfo(d, what, sizeof(T), &v, nullptr) != CL_SUCCESS) return T{};
  return v;
}

/// Human-readable byte count, e.g. "256.0 MiB".
std::string format_bytes(std::uint64_t bytes);

}  // namespace prism::detail
