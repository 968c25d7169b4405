// SPDX-License-Identifier: Apache-2.0
// Loading of PRISM_ROUTES files with includes (see routes_file.hpp).
#include "dispatch/config/routes_file.hpp"

#include <filesystem>
#include <set>
#include <vector>

#include "dispatch/config/yaml_file.hpp"
#include "prism/error.hpp"

namespace prism::dispatch {
namespace {

namespace fs = std::filesystem;

// Includes are bounded: a file is read and applied once (at its first include, like #pragma
// once), so that a tree of includes costs one parse per file, not one per path through it.
constexpr std::size_t max_include_depth = 16;
constexpr std::size_t max_files = 64;

struct load_state {
  std::vector<fs::path> stack;  // the include chain, for cycles and depth
  std::set<fs::path> done;      // files already applied
};

void load_into(const fs::path& path, routes_config& out, load_state& st) {
  auto canonical = fs::weakly_canonical(path);
  for (const auto& p : st.stack)
    if (p == canonical)
      throw error(errc::config_error, "PRISM_ROUTES",
                  "include cycle: '" + path.string() + "' includes itself");
  if (st.done.count(canonical)) return;
  if (st.stack.size() >= max_include_depth)
    throw error(errc::config_error, "PRISM_ROUTES",
                "'" + path.string() + "': includes nested more than " + std::to_string(max_include_depth) +
                    " levels deep (from '" + st.stack.front().string() + "')");
  if (st.done.size() >= max_files)
    throw error(errc::config_error, "PRISM_ROUTES",
                "'" + path.string() + "': more than " + std::to_string(max_files) +
                    " files included (from '" + st.stack.front().string() + "')");
  st.done.insert(canonical);
  st.stack.push_back(canonical);
  const std::string file = path.string();
  auto root = load_yaml_file(file);
  if (root.IsNull()) {
    st.stack.pop_back();
    return;
  }
  if (!root.IsMap())
    throw error(errc::config_error, "PRISM_ROUTES",
                yaml_where(file, root) + ": expected a map with keys routes, unused, include");
  for (auto it = root.begin(); it != root.end(); ++it) {
    auto key = yaml_scalar(file, it->first, "a key (routes, unused or include)");
    if (key != "routes" && key != "unused" && key != "include")
      throw error(
          errc::config_error, "PRISM_ROUTES",
          yaml_where(file, it->first) + ": unknown key '" + key + "'; valid keys: routes, unused, include");
  }
  if (auto inc = root["include"]) {
    std::vector<YAML::Node> items;
    if (inc.IsSequence())
      for (auto n : inc) items.push_back(n);
    else
      items.push_back(inc);
    for (auto& n : items) {
      fs::path target = yaml_scalar(file, n, "an include file name");
      if (target.is_relative()) target = path.parent_path() / target;
      try {
        load_into(target, out, st);
      } catch (const error& e) {
        // Name the include line when the included file cannot be read at all.
        if (e.code() != errc::io_error) throw;
        throw error(errc::io_error, "PRISM_ROUTES", yaml_where(file, n) + ": include: " + e.message());
      }
    }
  }
  if (auto unused = root["unused"]) {
    if (!unused.IsSequence())
      throw error(errc::config_error, "PRISM_ROUTES",
                  yaml_where(file, unused) + ": 'unused' must be a list of op names");
    for (auto n : unused) {
      auto op = yaml_scalar(file, n, "an op name");
      out.routes.erase(op);
      out.unused[op] = yaml_where(file, n);
    }
  }
  if (auto routes = root["routes"]) {
    if (!routes.IsMap())
      throw error(errc::config_error, "PRISM_ROUTES",
                  yaml_where(file, routes) + ": 'routes' must be a map of op: backend");
    for (auto it = routes.begin(); it != routes.end(); ++it) {
      auto op = yaml_scalar(file, it->first, "an op name");
      out.unused.erase(op);
      out.routes[op] = yaml_route(file, it->first, it->second, op);
    }
  }
  st.stack.pop_back();
}

}  // namespace

routes_config load_routes_file(const std::string& path) {
  routes_config out;
  load_state st;
  load_into(path, out, st);
  return out;
}

}  // namespace prism::dispatch
