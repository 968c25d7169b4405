// SPDX-License-Identifier: Apache-2.0
// The one include of the Khronos C++ bindings (CL/opencl.hpp) for prism and its users. Include
// this instead of <CL/opencl.hpp>: Debian 12's opencl-clhpp calls
// cl::detail::getContextPlatformVersion without defining it when CL_HPP_MINIMUM_OPENCL_VERSION is
// 120 and the target is >= 200 (the versions prism sets in CMake), so it is supplied here.
#pragma once

#include <CL/cl.h>

#if defined(CL_HPP_MINIMUM_OPENCL_VERSION) && defined(CL_HPP_TARGET_OPENCL_VERSION) && \
    CL_HPP_MINIMUM_OPENCL_VERSION >= 120 && CL_HPP_MINIMUM_OPENCL_VERSION < 200 &&     \
    CL_HPP_TARGET_OPENCL_VERSION >= 200 && !defined(PRISM_CLHPP_HAS_CONTEXT_PLATFORM_VERSION)
#define PRISM_CLHPP_SHIM 1
namespace cl::detail {
inline cl_uint getContextPlatformVersion(cl_context context);  // NOLINT(readability-identifier-naming)
}  // namespace cl::detail
#endif

#include <CL/opencl.hpp>

#ifdef PRISM_CLHPP_SHIM
namespace cl::detail {
/// OpenCL version of the context's platform, major in the upper 16 bits (as opencl.hpp expects).
inline cl_uint getContextPlatformVersion(cl_context context) {  // NOLINT(readability-identifier-naming)
  cl_device_id device = nullptr;
  if (::clGetContextInfo(context, CL_CONTEXT_DEVICES, sizeof device, &device, nullptr) != CL_SUCCESS ||
      !device)
    return 0;
  cl_platform_id platform = nullptr;
  ::clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof platform, &platform, nullptr);
  char version[128] = {};
  ::clGetPlatformInfo(platform, CL_PLATFORM_VERSION, sizeof version - 1, version, nullptr);
  unsigned major = 0, minor = 0;
  const char* p = version + 7;  // "OpenCL <major>.<minor> ..."
  while (*p >= '0' && *p <= '9') major = major * 10 + static_cast<unsigned>(*p++ - '0');
  if (*p == '.') ++p;
  while (*p >= '0' && *p <= '9') minor = minor * 10 + static_cast<unsigned>(*p++ - '0');
  return (major << 16) | minor;
}
}  // namespace cl::detail
#endif
