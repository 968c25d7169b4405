// SPDX-License-Identifier: Apache-2.0
// Loading YAML files with errors that name the file and line (yaml-cpp's marks are 0-based).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <string>

#include "dispatch/config/routes_file.hpp"

namespace prism::dispatch {

/// Limits that keep a hostile configuration file bounded in time and memory.
inline constexpr std::size_t max_config_bytes = 1u << 20;  // 1 MiB
inline constexpr std::size_t max_yaml_nodes = 100'000;     // aliases counted each time used
inline constexpr int max_yaml_depth = 64;

/// The text of a configuration file: only a regular file of at most max_config_bytes is read
/// (a directory or /dev/zero is an error naming `what` and the path).
std::string read_config_file(const std::string& path, const std::string& what);

/// Throws errc::config_error when the parsed tree has more than max_yaml_nodes nodes (aliases
/// expanded) or is nested deeper than max_yaml_depth.
void check_yaml_size(const std::string& path, const YAML::Node& root);

/// Parses `path` (read_config_file, then check_yaml_size). Throws errc::io_error when it cannot
/// be read and errc::config_error "<path>:<line>:<column>: <problem>" when it is not valid YAML.
YAML::Node load_yaml_file(const std::string& path);

/// "<path>:<line>" of a node (line 1-based), for messages about its content.
std::string yaml_where(const std::string& path, const YAML::Node& node);

/// Reads a scalar or throws errc::config_error naming file, line and what was expected.
std::string yaml_scalar(const std::string& path, const YAML::Node& node, const std::string& what);

/// One `op: backend` or `op: {backend, config}` entry of a routes map (routes files and vendor
/// profiles share the syntax); origin is "<path>:<line>" of the key.
file_route yaml_route(const std::string& path, const YAML::Node& key, const YAML::Node& value,
                      const std::string& op);

}  // namespace prism::dispatch
