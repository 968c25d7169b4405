// YAML loading with file:line errors (see yaml_file.hpp).
#include "dispatch/config/yaml_file.hpp"

#include <fstream>
#include <sstream>

#include "prism/error.hpp"

namespace prism::dispatch {

YAML::Node load_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw error(errc::io_error, "dispatch config", "cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return YAML::Load(text.str());
  } catch (const YAML::ParserException& e) {
    throw error(errc::config_error, "dispatch config",
                path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                    ": malformed YAML: " + e.msg);
  }
}

std::string yaml_where(const std::string& path, const YAML::Node& node) {
  auto m = node.Mark();
  if (m.line < 0) return path;
  return path + ":" + std::to_string(m.line + 1);
}

std::string yaml_scalar(const std::string& path, const YAML::Node& node, const std::string& what) {
  if (!node || !node.IsScalar())
    throw error(errc::config_error, "dispatch config", yaml_where(path, node) + ": expected " + what);
  return node.as<std::string>();
}

file_route yaml_route(const std::string& path, const YAML::Node& key, const YAML::Node& value,
                      const std::string& op) {
  file_route r;
  r.origin = yaml_where(path, key);
  if (value.IsMap()) {
    r.backend = yaml_scalar(path, value["backend"], "'backend: <name>' under '" + op + "'");
    if (auto c = value["config"]) r.config = yaml_scalar(path, c, "a config string");
  } else {
    r.backend = yaml_scalar(path, value, "a backend name for '" + op + "'");
  }
  return r;
}

}  // namespace prism::dispatch
