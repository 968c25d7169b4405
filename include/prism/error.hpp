// SPDX-License-Identifier: Apache-2.0
// prism::error: the one exception type prism throws at its API boundary.
#pragma once

#include <exception>
#include <string>
#include <string_view>

namespace prism {

/// What kind of failure an error reports. Stable: tests and users switch on it.
enum class errc {
  invalid_argument,  ///< bad shapes, dtypes, dims, options, names
  device_not_found,  ///< no device matched a selector or PRISM_DEVICE
  out_of_memory,     ///< an allocation larger than the device allows, or the device ran out
  build_failure,     ///< an OpenCL program failed to compile; the message holds the log
  opencl_error,      ///< any other OpenCL call that failed
  unsupported,       ///< the device or backend cannot do what was asked
  not_found,         ///< a named thing (op, backend, vendor, file, row) does not exist
  io_error,          ///< a file could not be read or written
  config_error,      ///< malformed YAML / JSON / env configuration
  database_error,    ///< the tuning database failed
  async_error,       ///< an asynchronous command failure, rethrown at a wait
  internal,          ///< a prism bug
};

/// Name of an error code, e.g. "invalid_argument".
const char* errc_name(errc code) noexcept;

/// Name of an OpenCL status code, e.g. "CL_OUT_OF_RESOURCES"; "" for 0, "CL_UNKNOWN_ERROR(<n>)"-style
/// names are returned for codes the headers do not know.
std::string cl_error_name(int cl_status);

/// The exception prism throws. what() reads "<operation>: <message> [<CL name>]".
/// Thread safety: immutable after construction.
class error : public std::exception {
 public:
  error(errc code, std::string operation, std::string message, int cl_status = 0);

  errc code() const noexcept { return code_; }
  /// The failed operation, e.g. "clBuildProgram" or "ops::add".
  const std::string& operation() const noexcept { return operation_; }
  const std::string& message() const noexcept { return message_; }
  /// The OpenCL status (0 when the error did not come from OpenCL) and its name ("" when 0).
  int cl_status() const noexcept { return cl_status_; }
  const std::string& cl_error_name() const noexcept { return cl_name_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  errc code_;
  std::string operation_;
  std::string message_;
  int cl_status_;
  std::string cl_name_;
  std::string what_;
};

}  // namespace prism
