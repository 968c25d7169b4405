// SPDX-License-Identifier: Apache-2.0
// prism::error and the names of error codes and OpenCL status codes.
#include "prism/error.hpp"

#include "prism/interop/cl_hpp.hpp"

#include <string>

namespace prism {

const char* errc_name(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::device_not_found:
      return "device_not_found";
    case errc::out_of_memory:
      return "out_of_memory";
    case errc::build_failure:
      return "build_failure";
    case errc::opencl_error:
      return "opencl_error";
    case errc::unsupported:
      return "unsupported";
    case errc::not_found:
      return "not_found";
    case errc::io_error:
      return "io_error";
    case errc::config_error:
      return "config_error";
    case errc::database_error:
      return "database_error";
    case errc::async_error:
      return "async_error";
    case errc::internal:
      return "internal";
  }
  return "unknown_errc";
}

std::string cl_error_name(int s) {
#define PRISM_CL_NAME(x) \
  case x:                \
    return #x;
  switch (s) {
    case 0:
      return "";
      PRISM_CL_NAME(CL_DEVICE_NOT_FOUND)
      PRISM_CL_NAME(CL_DEVICE_NOT_AVAILABLE)
      PRISM_CL_NAME(CL_COMPILER_NOT_AVAILABLE)
      PRISM_CL_NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
      PRISM_CL_NAME(CL_OUT_OF_RESOURCES)
      PRISM_CL_NAME(CL_OUT_OF_HOST_MEMORY)
      PRISM_CL_NAME(CL_PROFILING_INFO_NOT_AVAILABLE)
      PRISM_CL_NAME(CL_MEM_COPY_OVERLAP)
      PRISM_CL_NAME(CL_IMAGE_FORMAT_MISMATCH)
      PRISM_CL_NAME(CL_IMAGE_FORMAT_NOT_SUPPORTED)
      PRISM_CL_NAME(CL_BUILD_PROGRAM_FAILURE)
      PRISM_CL_NAME(CL_MAP_FAILURE)
      PRISM_CL_NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET)
      PRISM_CL_NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
      PRISM_CL_NAME(CL_COMPILE_PROGRAM_FAILURE)
      PRISM_CL_NAME(CL_LINKER_NOT_AVAILABLE)
      PRISM_CL_NAME(CL_LINK_PROGRAM_FAILURE)
      PRISM_CL_NAME(CL_DEVICE_PARTITION_FAILED)
      PRISM_CL_NAME(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
      PRISM_CL_NAME(CL_INVALID_VALUE)
      PRISM_CL_NAME(CL_INVALID_DEVICE_TYPE)
      PRISM_CL_NAME(CL_INVALID_PLATFORM)
      PRISM_CL_NAME(CL_INVALID_DEVICE)
      PRISM_CL_NAME(CL_INVALID_CONTEXT)
      PRISM_CL_NAME(CL_INVALID_QUEUE_PROPERTIES)
      PRISM_CL_NAME(CL_INVALID_COMMAND_QUEUE)
      PRISM_CL_NAME(CL_INVALID_HOST_PTR)
      PRISM_CL_NAME(CL_INVALID_MEM_OBJECT)
      PRISM_CL_NAME(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
      PRISM_CL_NAME(CL_INVALID_IMAGE_SIZE)
      PRISM_CL_NAME(CL_INVALID_SAMPLER)
      PRISM_CL_NAME(CL_INVALID_BINARY)
      PRISM_CL_NAME(CL_INVALID_BUILD_OPTIONS)
      PRISM_CL_NAME(CL_INVALID_PROGRAM)
      PRISM_CL_NAME(CL_INVALID_PROGRAM_EXECUTABLE)
      PRISM_CL_NAME(CL_INVALID_KERNEL_NAME)
      PRISM_CL_NAME(CL_INVALID_KERNEL_DEFINITION)
      PRISM_CL_NAME(CL_INVALID_KERNEL)
      PRISM_CL_NAME(CL_INVALID_ARG_INDEX)
      PRISM_CL_NAME(CL_INVALID_ARG_VALUE)
      PRISM_CL_NAME(CL_INVALID_ARG_SIZE)
      PRISM_CL_NAME(CL_INVALID_KERNEL_ARGS)
      PRISM_CL_NAME(CL_INVALID_WORK_DIMENSION)
      PRISM_CL_NAME(CL_INVALID_WORK_GROUP_SIZE)
      PRISM_CL_NAME(CL_INVALID_WORK_ITEM_SIZE)
      PRISM_CL_NAME(CL_INVALID_GLOBAL_OFFSET)
      PRISM_CL_NAME(CL_INVALID_EVENT_WAIT_LIST)
      PRISM_CL_NAME(CL_INVALID_EVENT)
      PRISM_CL_NAME(CL_INVALID_OPERATION)
      PRISM_CL_NAME(CL_INVALID_GL_OBJECT)
      PRISM_CL_NAME(CL_INVALID_BUFFER_SIZE)
      PRISM_CL_NAME(CL_INVALID_MIP_LEVEL)
      PRISM_CL_NAME(CL_INVALID_GLOBAL_WORK_SIZE)
      PRISM_CL_NAME(CL_INVALID_PROPERTY)
      PRISM_CL_NAME(CL_INVALID_IMAGE_DESCRIPTOR)
      PRISM_CL_NAME(CL_INVALID_COMPILER_OPTIONS)
      PRISM_CL_NAME(CL_INVALID_LINKER_OPTIONS)
      PRISM_CL_NAME(CL_INVALID_DEVICE_PARTITION_COUNT)
      PRISM_CL_NAME(CL_INVALID_PIPE_SIZE)
      PRISM_CL_NAME(CL_INVALID_DEVICE_QUEUE)
      PRISM_CL_NAME(CL_INVALID_SPEC_ID)
      PRISM_CL_NAME(CL_MAX_SIZE_RESTRICTION_EXCEEDED)
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
      return "CL_UNKNOWN_ERROR(" + std::to_string(s) + ")";
  }
#undef PRISM_CL_NAME
}

error::error(errc code, std::string operation, std::string message, int cl_status)
    : code_(code),
      operation_(std::move(operation)),
      message_(std::move(message)),
      cl_status_(cl_status),
      cl_name_(prism::cl_error_name(cl_status)) {
  what_ = operation_ + ": " + message_;
  if (!cl_name_.empty()) what_ += " [" + cl_name_ + "]";
}

}  // namespace prism
