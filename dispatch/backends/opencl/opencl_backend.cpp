// SPDX-License-Identifier: Apache-2.0
// The opencl backend: the op descriptors' own OpenCL implementations, configs from the op's
// schema with defaults and search spaces from the vendor's tune_configs.yaml, and the kernel
// sources (embedded or the vendor's override) as what a tuned row depends on.
#include <algorithm>
#include <random>
#include <set>

#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"
#include "dispatch/backends/opencl/opencl_backend.hpp"
#include "kernels/cl_source.hpp"
#include "prism/error.hpp"
#include "runtime/hash.hpp"

namespace prism::dispatch {

opencl_space opencl_configs(const op_descriptor& d, const vendor_context& vendor,
                            const candidate_options& o) {
  auto space = vendor.tune_space_of(d);
  opencl_space out;
  out.vendor = space.vendor;
  std::vector<kernel_config> base{space.defaults};
  for (const auto& c : space.configs)
    if (std::find(base.begin(), base.end(), c) == base.end()) base.push_back(c);
  for (const auto& c : base) out.explicit_configs.push_back(c.str());

  // The parameters the vendor file actually varies are the ones that matter on this device;
  // step each of them through its allowed values around every explicit config.
  std::vector<const config_param*> varying;
  for (const auto& p : d.config.params) {
    bool differs = false;
    for (const auto& c : base)
      differs = differs || c.get(p.name, p.default_value) != base[0].get(p.name, p.default_value);
    if (differs) varying.push_back(&p);
  }
  std::vector<std::string> generated;
  std::set<std::string> seen(out.explicit_configs.begin(), out.explicit_configs.end());
  for (const auto& b : base)
    for (const auto* p : varying) {
      std::vector<std::int64_t> values = p->allowed;
      if (values.empty()) {
        const std::int64_t v = b.get(p->name, p->default_value);
        values = {std::max<std::int64_t>(1, v / 2), v * 2};
      }
      for (auto v : values) {
        kernel_config c = b;
        c.set(p->name, v);
        if (d.config.validate(c)) continue;
        std::string text = d.config.complete(c).str();
        if (seen.insert(text).second) generated.push_back(text);
      }
    }
  if (o.pick == strategy::random && o.max_per_backend > 0 && generated.size() > o.max_per_backend) {
    std::mt19937_64 rng(o.seed ^ 0x67656e6572617465ULL);
    std::vector<std::size_t> idx(generated.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(o.max_per_backend);
    std::sort(idx.begin(), idx.end());
    std::vector<std::string> kept;
    for (auto i : idx) kept.push_back(generated[i]);
    generated = std::move(kept);
  }
  out.generated = std::move(generated);
  return out;
}

namespace {

class opencl final : public backend {
 public:
  const char* name() const noexcept override { return "opencl"; }

  std::vector<op_implementation> implementations(const op_descriptor& d) const override {
    return d.implementations;
  }

  kernel_config read_config(const op_descriptor& d, const std::string& text,
                            const vendor_context& vendor) const override {
    if (text.empty()) return d.config.params.empty() ? kernel_config{} : vendor.tune_space_of(d).defaults;
    // The op's parameters are named once: validate() lists them itself for an unknown name.
    auto invalid = [&](const std::string& why, bool list_params) {
      return error(errc::config_error, "ops::" + d.name,
                   fmt::format("opencl config '{}' is not valid: {}{}", text, why,
                               list_params ? "; parameters: " + d.config.param_names() : ""));
    };
    kernel_config parsed;
    try {
      parsed = kernel_config::parse(text);
    } catch (const prism::error& e) {
      throw invalid(e.message(), true);
    }
    if (auto why = d.config.validate(parsed)) {
      const bool unknown_name = std::any_of(parsed.items().begin(), parsed.items().end(),
                                            [&](const auto& item) { return !d.config.has(item.first); });
      throw invalid("'" + parsed.str() + "': " + *why, !unknown_name);
    }
    return d.config.complete(parsed);
  }

  std::vector<candidate> candidates(const device&, const op_descriptor& d, dtype,
                                    const vendor_context& vendor, const candidate_options& o) const override {
    if (!o.backends.empty() && !o.lists(name())) return {};
    if (d.config.params.empty()) return {{name(), "", "opencl (no tunable parameters)"}};
    std::vector<candidate> out;
    auto configs = opencl_configs(d, vendor, o);
    for (const auto& c : configs.explicit_configs)
      out.push_back({name(), c, "vendors/" + configs.vendor + "/tune_configs.yaml"});
    for (const auto& c : configs.generated) out.push_back({name(), c, "generated around tune_configs.yaml"});
    return out;
  }

  std::uint64_t source_hash(const op_descriptor& d, const vendor_context& vendor,
                            std::uint64_t h) const override {
    h = hash::fnv1a64(embedded_kernel_source("prelude.cl"), h);
    for (const auto& impl : d.implementations) {
      if (impl.kernel_file.empty()) continue;
      h = hash::fnv1a64(impl.name + '\n', h);
      if (const auto* o = vendor.kernel(impl.kernel_file))
        h = hash::fnv1a64(o->text, h);
      else
        h = hash::fnv1a64(embedded_kernel_source(impl.kernel_file), h);
    }
    return h;
  }
};

}  // namespace

const backend& opencl_backend() {
  static const opencl b;
  return b;
}

}  // namespace prism::dispatch
