// SPDX-License-Identifier: Apache-2.0
// Routing precedence (see routing.hpp and docs/dispatch.md).
#include "dispatch/config/routing.hpp"

#include <algorithm>

#include "prism/error.hpp"

namespace prism::dispatch {

namespace {

// Routes files and vendor profiles route an op the same way: an explicit route, else 'unused'
// (served by the op's backend of last resort). Returns false when the file says nothing about
// the op.
// Conditional entries are collected into `cases`; a list without a fallback says nothing more
// (returns false), so the next tier routes the calls no condition takes.
template <class route_source>
bool route_from_file(const route_source& file, const op_catalog_entry& op, source_tier tier, static_route& r,
                     std::vector<conditional_route>& cases) {
  if (auto it = file.routes.find(op.name); it != file.routes.end()) {
    for (const auto& c : it->second.cases) cases.push_back({c, tier});
    if (it->second.backend.empty()) return false;
    r.backend = it->second.backend;
    r.config = it->second.config;
    r.tier = tier;
    r.origin = it->second.origin;
    return true;
  }
  if (auto it = file.unused.find(op.name); it != file.unused.end()) {
    r.backend = op.backends.back();
    r.tier = tier;
    r.origin = it->second;
    r.unused = true;
    return true;
  }
  return false;
}

}  // namespace

static_route resolve_route(const op_catalog_entry& op, const routing_sources& src) {
  static_route r;
  if (src.env) {
    for (const auto& e : src.env->routes)
      if (e.op == op.name) {
        r.backend = e.backend;
        r.tier = source_tier::env;
        r.origin = e.variable;
        return r;
      }
    if (std::find(src.env->unused.begin(), src.env->unused.end(), op.name) != src.env->unused.end()) {
      r.backend = op.backends.back();
      r.tier = source_tier::env;
      r.origin = "PRISM_UNUSED";
      r.unused = true;
      return r;
    }
  }
  std::vector<conditional_route> cases;
  if (!(src.routes && route_from_file(*src.routes, op, source_tier::routes, r, cases)) &&
      !(src.vendor && route_from_file(*src.vendor, op, source_tier::vendor, r, cases))) {
    r.backend = op.backends.front();
    r.tier = source_tier::default_order;
    r.origin = "built-in";
  }
  r.cases = std::move(cases);
  return r;
}

static_route route_for_shape(const static_route& r, const shape_key& key) {
  static_route out;
  for (const auto& c : r.cases)
    if (c.entry.when.holds(key)) {
      out.backend = c.entry.backend;
      out.config = c.entry.config;
      out.tier = c.tier;
      out.origin = c.entry.origin;
      return out;
    }
  out = r;
  out.cases.clear();
  return out;
}

std::vector<std::string> candidate_order(const op_catalog_entry& op, const std::string& first) {
  std::vector<std::string> out{first};
  for (const auto& b : op.backends)
    if (b != first) out.push_back(b);
  return out;
}

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

void check(const std::vector<op_catalog_entry>& catalog, const std::vector<std::string>& backends,
           const std::string& where, const std::string& op, const std::string* backend) {
  auto it =
      std::find_if(catalog.begin(), catalog.end(), [&](const op_catalog_entry& e) { return e.name == op; });
  if (it == catalog.end()) {
    std::vector<std::string> names;
    for (const auto& e : catalog) names.push_back(e.name);
    throw error(errc::not_found, where, "unknown op '" + op + "'; valid ops: " + join(names));
  }
  if (!backend) return;
  if (backend->empty()) return;  // a conditional list without a fallback
  if (std::find(backends.begin(), backends.end(), *backend) == backends.end())
    throw error(errc::not_found, where,
                "unknown backend '" + *backend + "' for op '" + op + "'; valid backends: " + join(backends));
  if (std::find(it->backends.begin(), it->backends.end(), *backend) == it->backends.end())
    throw error(errc::not_found, where,
                "backend '" + *backend + "' does not implement op '" + op + "'; backends of '" + op +
                    "': " + join(it->backends));
}

void check_cases(const std::vector<op_catalog_entry>& catalog, const std::vector<std::string>& backends,
                 const std::string& op, const file_route& r) {
  auto it =
      std::find_if(catalog.begin(), catalog.end(), [&](const op_catalog_entry& e) { return e.name == op; });
  for (const auto& c : r.cases) {
    check(catalog, backends, c.origin, op, &c.backend);
    for (const auto& name : c.when.names())
      if (name != route_esize_component && name != route_qbits_component &&
          std::find(it->key_names.begin(), it->key_names.end(), name) == it->key_names.end())
        throw error(errc::config_error, c.origin,
                    "condition '" + c.when.text() + "' reads '" + name +
                        "', which is not a shape-key component of '" + op + "'; valid components: " +
                        (it->key_names.empty() ? std::string("(none: the op has no shape key)")
                                               : join(it->key_names)) +
                        ", and esize (bytes per element of the first output) and qbits (bits per "
                        "weight value of a block-quantized input, 0 without one)");
  }
}

}  // namespace

void validate_sources(const std::vector<op_catalog_entry>& catalog, const std::vector<std::string>& backends,
                      const env_settings& env, const routes_config* routes,
                      const std::vector<vendor_profile>& vendors) {
  for (const auto& e : env.routes) check(catalog, backends, e.variable, e.op, &e.backend);
  for (const auto& op : env.unused) check(catalog, backends, "PRISM_UNUSED", op, nullptr);
  if (routes) {
    for (const auto& [op, r] : routes->routes) {
      check(catalog, backends, r.origin, op, &r.backend);
      check_cases(catalog, backends, op, r);
    }
    for (const auto& [op, origin] : routes->unused) check(catalog, backends, origin, op, nullptr);
  }
  for (const auto& v : vendors) {
    for (const auto& [op, r] : v.routes) {
      check(catalog, backends, r.origin, op, &r.backend);
      check_cases(catalog, backends, op, r);
    }
    for (const auto& [op, origin] : v.unused) check(catalog, backends, origin, op, nullptr);
    for (const auto& [file, override_file] : v.kernels) {
      std::vector<std::string> known;
      for (const auto& e : catalog)
        for (const auto& k : e.kernel_files)
          if (std::find(known.begin(), known.end(), k) == known.end()) known.push_back(k);
      if (std::find(known.begin(), known.end(), file) == known.end()) {
        std::sort(known.begin(), known.end());
        throw error(
            errc::not_found, override_file.path,
            "kernel override '" + file + "' replaces no prism kernel file; valid names: " + join(known));
      }
    }
  }
}

}  // namespace prism::dispatch
