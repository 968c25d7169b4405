// The opencl backend: the op descriptors' own implementations, with their config schema and
// the vendor's tune_configs.yaml defaults; vendor kernel overrides are passed to enqueue.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"
#include "prism/error.hpp"
#include "runtime/paths.hpp"

namespace prism::dispatch {

tune_space vendor_tune_space(const op_descriptor& d, const vendor_profile* vendor) {
  if (vendor) {
    const auto file = std::filesystem::path(vendor->directory) / "tune_configs.yaml";
    const auto shipped = data_dir() / "vendors" / vendor->name / "tune_configs.yaml";
    std::error_code ec;
    if (std::filesystem::exists(file) && !std::filesystem::equivalent(file, shipped, ec)) {
      // A profile outside the data dir (PRISM_VENDOR_PATH): parse its file once.
      static std::mutex mutex;
      static auto* cache = new std::map<std::string, std::map<std::string, tune_space>>;
      std::lock_guard lock(mutex);
      auto it = cache->find(file.string());
      if (it == cache->end()) {
        std::ifstream in(file);
        std::stringstream text;
        text << in.rdbuf();
        it = cache->emplace(file.string(), parse_tune_configs(text.str(), vendor->name, file.string())).first;
      }
      if (auto op = it->second.find(d.name); op != it->second.end()) return op->second;
    }
  }
  return load_tune_space(d, vendor ? vendor->name : "generic");
}

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
  return {[desc](const std::string& text, const vendor_profile* vendor) {
    if (text.empty()) {
      if (desc->config.params.empty()) return kernel_config{};
      return vendor_tune_space(*desc, vendor).defaults;
    }
    // The op's parameters are named once: validate() lists them itself for an unknown name.
    auto invalid = [&](const std::string& why, bool list_params) {
      return error(errc::config_error, "ops::" + desc->name,
                   fmt::format("opencl config '{}' is not valid: {}{}", text, why,
                               list_params ? "; parameters: " + desc->config.param_names() : ""));
    };
    kernel_config parsed;
    try {
      parsed = kernel_config::parse(text);
    } catch (const prism::error& e) {
      throw invalid(e.message(), true);
    }
    if (auto why = desc->config.validate(parsed)) {
      const bool unknown_name = std::any_of(parsed.items().begin(), parsed.items().end(),
                                            [&](const auto& item) { return !desc->config.has(item.first); });
      throw invalid("'" + parsed.str() + "': " + *why, !unknown_name);
    }
    return desc->config.complete(parsed);
  }};
}

}  // namespace prism::dispatch
