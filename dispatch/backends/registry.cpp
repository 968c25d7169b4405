// SPDX-License-Identifier: Apache-2.0
// The backend registry: the one list of backends, in built-in preference order. Adding a backend
// is a folder under dispatch/backends/ plus one line here.
#include <algorithm>

#include "dispatch/backends/backend.hpp"
#include "prism/dispatch.hpp"
#include "prism/error.hpp"

namespace prism::dispatch {

const std::vector<const backend*>& backend_registry() {
  static const std::vector<const backend*> all = {&opencl_backend(), &clblast_backend(), &host_backend()};
  return all;
}

const backend* find_backend(std::string_view name) {
  for (const auto* b : backend_registry())
    if (name == b->name()) return b;
  return nullptr;
}

const backend& backend_named(std::string_view name, const std::string& what) {
  if (const auto* b = find_backend(name)) return *b;
  std::string valid;
  for (const auto* b : backend_registry()) valid += (valid.empty() ? "" : ", ") + std::string(b->name());
  throw error(errc::not_found, what, "unknown backend '" + std::string(name) + "'; valid: " + valid);
}

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto* b : backend_registry()) out.emplace_back(b->name());
    return out;
  }();
  return names;
}

bool candidate_options::lists(std::string_view backend) const {
  return std::find(backends.begin(), backends.end(), backend) != backends.end();
}

const tune_space& vendor_context::tune_space_of(const op_descriptor& d) const {
  if (set) return set->tune_space_of(d, profile);
  return schema_tune_space_of(d);
}

const kernel_override* vendor_context::kernel(const std::string& kernel_file) const {
  if (!profile) return nullptr;
  auto it = profile->kernels.find(kernel_file);
  return it == profile->kernels.end() ? nullptr : &it->second;
}

}  // namespace prism::dispatch
