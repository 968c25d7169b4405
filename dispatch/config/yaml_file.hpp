// Loading YAML files with errors that name the file and line (yaml-cpp's marks are 0-based).
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "dispatch/config/routes_file.hpp"

namespace prism::dispatch {

/// Parses `path`. Throws errc::io_error when it cannot be read and errc::config_error
/// "<path>:<line>:<column>: <problem>" when it is not valid YAML.
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
