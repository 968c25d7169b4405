// The dispatcher's view of one implementation of an op: a backend name, supports() with a
// reason, enqueue() and the backend's config parsing. Backends: opencl (the descriptors' own
// implementations), clblast (GEMM family) and host (OpenBLAS / descriptor references).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/config/vendor_profile.hpp"
#include "kernels/op_descriptor.hpp"

namespace prism::dispatch {

inline const std::vector<std::string>& known_backends() {
  static const std::vector<std::string> names = {"opencl", "clblast", "host"};
  return names;
}

struct implementation {
  std::string backend;      ///< "opencl", "clblast", "host"
  std::string name;         ///< e.g. "opencl.cpu", "clblast.gemm", "host.openblas"
  std::string kernel_file;  ///< opencl only: the kernels/cl file a vendor override replaces
  /// nullopt when it can run the call with the config, else why not (prefixed with the
  /// backend by the dispatcher).
  std::function<std::optional<std::string>(const device&, const op_call&, const kernel_config&)> supports;
  std::function<event(queue&, const op_call&, const kernel_config&, source_override)> enqueue;
};

/// How a backend reads config strings for one op: "" gives its default for the vendor profile
/// (nullptr: none matched).
struct config_reader {
  /// Throws errc::config_error naming the op, backend, the bad text and what is valid.
  std::function<kernel_config(const std::string& text, const vendor_profile* vendor)> parse;
};

/// The op's default config and search space for a vendor profile: the profile folder's own
/// tune_configs.yaml when it has one (profiles from PRISM_VENDOR_PATH included), else the
/// kernels layer's lookup of the shipped vendors/<name>/tune_configs.yaml with generic fallback.
tune_space vendor_tune_space(const op_descriptor& d, const vendor_profile* vendor);

std::vector<implementation> opencl_implementations(const op_descriptor& d);
config_reader opencl_config_reader(const op_descriptor& d);

/// Empty for ops other than mm, bmm, addmm, linear.
std::vector<implementation> clblast_implementations(const op_descriptor& d);
config_reader clblast_config_reader(const op_descriptor& d);

/// Every op has one host implementation (OpenBLAS for the GEMM family).
std::vector<implementation> host_implementations(const op_descriptor& d);
config_reader host_config_reader(const op_descriptor& d);

/// True for the ops the clblast and OpenBLAS paths serve.
bool is_gemm_family(const std::string& op);

}  // namespace prism::dispatch
