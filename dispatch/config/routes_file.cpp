// Loading of PRISM_ROUTES files with includes (see routes_file.hpp).
#include "dispatch/config/routes_file.hpp"

#include <filesystem>
#include <vector>

#include "dispatch/config/yaml_file.hpp"
#include "prism/error.hpp"

namespace prism::dispatch {
namespace {

namespace fs = std::filesystem;

void load_into(const fs::path& path, routes_config& out, std::vector<fs::path>& stack) {
  auto canonical = fs::weakly_canonical(path);
  for (const auto& p : stack)
    if (p == canonical)
      throw error(errc::config_error, "PRISM_ROUTES",
                  "include cycle: '" + path.string() + "' includes itself");
  stack.push_back(canonical);
  const std::string file = path.string();
  auto root = load_yaml_file(file);
  if (root.IsNull()) {
    stack.pop_back();
    return;
  }
  if (!root.IsMap())
    throw error(errc::config_error, "PRISM_ROUTES",
                yaml_where(file, root) + ": expected a map with keys routes, unused, include");
  for (auto it = root.begin(); it != root.end(); ++it) {
    auto key = it->first.as<std::string>();
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
      load_into(target, out, stack);
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
  stack.pop_back();
}

}  // namespace

routes_config load_routes_file(const std::string& path) {
  routes_config out;
  std::vector<fs::path> stack;
  load_into(path, out, stack);
  return out;
}

}  // namespace prism::dispatch
