// SPDX-License-Identifier: Apache-2.0
// YAML loading with file:line errors (see yaml_file.hpp).
#include "dispatch/config/yaml_file.hpp"

#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "prism/error.hpp"

namespace prism::dispatch {

std::string read_config_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw error(errc::io_error, "dispatch config", "cannot read " + what + " '" + path + "': no such file");
  if (!S_ISREG(st.st_mode))
    throw error(errc::io_error, "dispatch config",
                "cannot read " + what + " '" + path + "': it is " +
                    (S_ISDIR(st.st_mode) ? "a directory" : "not a regular file") +
                    ", a YAML file is expected");
  if (static_cast<std::uint64_t>(st.st_size) > max_config_bytes)
    throw error(errc::config_error, "dispatch config",
                path + ": the file is " + std::to_string(st.st_size) +
                    " bytes; configuration files may be at most " + std::to_string(max_config_bytes) +
                    " bytes");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(errc::io_error, "dispatch config", "cannot read " + what + " '" + path + "'");
  // Read at most one byte past the limit, whatever the size said.
  std::string text(max_config_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > max_config_bytes)
    throw error(errc::config_error, "dispatch config",
                path + ": configuration files may be at most " + std::to_string(max_config_bytes) + " bytes");
  return text;
}

void check_yaml_size(const std::string& path, const YAML::Node& root) {
  std::size_t visited = 0;
  // Iterative walk: aliases are visited each time they are used, so an alias bomb stops here.
  std::vector<std::pair<YAML::Node, int>> todo{{root, 0}};
  while (!todo.empty()) {
    auto [node, depth] = todo.back();
    todo.pop_back();
    if (++visited > max_yaml_nodes)
      throw error(errc::config_error, "dispatch config",
                  path + ": the file expands to more than " + std::to_string(max_yaml_nodes) +
                      " YAML nodes (aliases are counted each time they are used)");
    if (depth > max_yaml_depth)
      throw error(
          errc::config_error, "dispatch config",
          yaml_where(path, node) + ": nested more than " + std::to_string(max_yaml_depth) + " levels deep");
    if (node.IsSequence()) {
      for (auto child : node) todo.emplace_back(child, depth + 1);
    } else if (node.IsMap()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        todo.emplace_back(it->first, depth + 1);
        todo.emplace_back(it->second, depth + 1);
      }
    }
  }
}

YAML::Node load_yaml_file(const std::string& path) {
  std::string text = read_config_file(path, "configuration file");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw error(errc::config_error, "dispatch config",
                path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                    ": malformed YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw error(errc::config_error, "dispatch config", path + ": malformed YAML: " + e.what());
  }
  check_yaml_size(path, root);
  return root;
}

std::string yaml_where(const std::string& path, const YAML::Node& node) {
  // An undefined node (a missing key) has no position.
  if (!node.IsDefined()) return path;
  YAML::Mark m;
  try {
    m = node.Mark();
  } catch (const YAML::Exception&) {
    return path;
  }
  if (m.line < 0) return path;
  return path + ":" + std::to_string(m.line + 1);
}

std::string yaml_scalar(const std::string& path, const YAML::Node& node, const std::string& what) {
  if (!node || !node.IsScalar())
    throw error(errc::config_error, "dispatch config", yaml_where(path, node) + ": expected " + what);
  return node.as<std::string>();
}

namespace {

void check_entry_keys(const std::string& path, const YAML::Node& entry, const std::string& op, bool list) {
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    auto k = it->first.as<std::string>();
    if (k == "backend" || k == "config" || (list && k == "when")) continue;
    throw error(errc::config_error, "dispatch config",
                yaml_where(path, it->first) + ": unknown key '" + k + "' in the route of '" + op +
                    "'; valid keys: " + (list ? "when, backend, config" : "backend, config"));
  }
}

}  // namespace

file_route yaml_route(const std::string& path, const YAML::Node& key, const YAML::Node& value,
                      const std::string& op) {
  file_route r;
  r.origin = yaml_where(path, key);
  if (value.IsSequence()) {
    // Conditional entries, in order; one without `when` is the fallback and must come last.
    constexpr std::size_t max_entries = 64;
    if (value.size() > max_entries)
      throw error(errc::config_error, "dispatch config",
                  yaml_where(path, value) + ": " + std::to_string(value.size()) + " route entries for '" +
                      op + "'; at most " + std::to_string(max_entries));
    bool fallback = false;
    for (auto entry : value) {
      const auto where = yaml_where(path, entry);
      if (!entry.IsMap())
        throw error(errc::config_error, "dispatch config",
                    where +
                        ": expected '{when: \"<condition>\", backend: <name>, config: ...}' in the "
                        "route list of '" +
                        op + "'");
      if (fallback)
        throw error(errc::config_error, "dispatch config",
                    where + ": an entry after the fallback (the entry without 'when') of '" + op +
                        "' is never used; put the fallback last");
      check_entry_keys(path, entry, op, true);
      std::string backend =
          yaml_scalar(path, entry["backend"], "'backend: <name>' in a route entry of '" + op + "'");
      std::string config;
      if (auto c = entry["config"]) config = yaml_scalar(path, c, "a config string");
      if (auto w = entry["when"]) {
        route_case rc;
        const auto text = yaml_scalar(path, w, "a condition string such as \"m <= 16\"");
        try {
          rc.when = route_condition::parse(text);
        } catch (const prism::error& e) {
          throw error(errc::config_error, "dispatch config", yaml_where(path, w) + ": " + e.message());
        }
        rc.backend = std::move(backend);
        rc.config = std::move(config);
        rc.origin = yaml_where(path, w);
        r.cases.push_back(std::move(rc));
      } else {
        fallback = true;
        r.backend = std::move(backend);
        r.config = std::move(config);
        r.origin = where;
      }
    }
    if (r.cases.empty() && !fallback)
      throw error(errc::config_error, "dispatch config",
                  yaml_where(path, value) + ": empty route list for '" + op + "'");
    return r;
  }
  if (value.IsMap()) {
    check_entry_keys(path, value, op, false);
    if (!value["backend"])
      throw error(
          errc::config_error, "dispatch config",
          yaml_where(path, key) + ": route '" + op + "' has no 'backend: <name>' (e.g. {backend: opencl})");
    r.backend = yaml_scalar(path, value["backend"], "'backend: <name>' under '" + op + "'");
    if (auto c = value["config"]) r.config = yaml_scalar(path, c, "a config string");
  } else {
    r.backend = yaml_scalar(path, value, "a backend name for '" + op + "'");
  }
  return r;
}

}  // namespace prism::dispatch
