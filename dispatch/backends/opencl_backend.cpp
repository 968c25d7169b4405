// The opencl backend: the op descriptors' own implementations, with their config schema and
// the vendor's tune_configs.yaml defaults; vendor kernel overrides are passed to enqueue.
#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"
#include "prism/error.hpp"

namespace prism::dispatch {

std::vector<implementation> opencl_implementations(const op_descriptor& d) {
  std::vector<implementation> out;
  for (const auto& impl : d.implementations) {
    implementation i;
    i.backend = "opencl";
    i.name = impl.name;
    i.kernel_file = impl.kernel_file;
    const op_implementation* p = &impl;
    i.supports = [p](const device& dev, const op_call& c,
                     const kernel_config& cfg) -> std::optional<std::string> {
      if (!p->supports) return std::nullopt;
      return p->supports(dev, c, cfg);
    };
    i.enqueue = [p](queue& q, const op_call& c, const kernel_config& cfg, source_override src) {
      return p->enqueue(q, c, cfg, src);
    };
    out.push_back(std::move(i));
  }
  return out;
}

config_reader opencl_config_reader(const op_descriptor& d) {
  const op_descriptor* desc = &d;
  return {[desc](const std::string& text, const std::string& vendor) {
    if (text.empty()) {
      if (desc->config.params.empty()) return kernel_config{};
      return load_tune_space(*desc, vendor.empty() ? "generic" : vendor).defaults;
    }
    try {
      return desc->config.complete(kernel_config::parse(text));
    } catch (const prism::error& e) {
      std::string valid;
      for (const auto& p : desc->config.params) valid += (valid.empty() ? "" : ", ") + p.name;
      throw error(errc::config_error, "ops::" + desc->name,
                  fmt::format("opencl config '{}' is not valid: {}; parameters: {}", text, e.message(),
                              valid.empty() ? "none" : valid));
    }
  }};
}

}  // namespace prism::dispatch
