// SPDX-License-Identifier: Apache-2.0
// The dispatcher's environment variables, parsed once from a snapshot of the environment (so
// tests can parse a synthetic one): PRISM_OP_*, PRISM_ROUTES, PRISM_UNUSED, PRISM_STRICT_ROUTES,
// PRISM_LOG_DISPATCH*, PRISM_VENDOR, PRISM_VENDOR_PATH.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace prism::dispatch {

using env_snapshot = std::vector<std::pair<std::string, std::string>>;

/// Every PRISM_* variable of the process environment (read from `environ`; PRISM_OP_<op> names
/// are open-ended, so they cannot be read one name at a time).
env_snapshot process_environment();

/// One op routed by an env variable.
struct env_route {
  std::string op;  ///< op name with "__" turned back into "."
  std::string backend;
  std::string variable;  ///< e.g. "PRISM_OP_mm"
};

struct log_settings {
  bool enabled = false;     ///< PRISM_LOG_DISPATCH set to anything but 0/off
  bool profile = false;     ///< "profile" (or "all"): device time from profiling events
  bool candidates = false;  ///< "dispatch" (or "all"): also each rejected candidate
  std::string file;         ///< PRISM_LOG_DISPATCH_FILE; empty = stderr
  std::string filter;       ///< PRISM_LOG_DISPATCH_FILTER (ECMAScript regex); empty = all
};

struct env_settings {
  std::vector<env_route> routes;    ///< PRISM_OP_<op>=<backend>, sorted by op
  std::vector<std::string> unused;  ///< PRISM_UNUSED=op1,op2
  std::string routes_file;          ///< PRISM_ROUTES
  bool strict = false;              ///< PRISM_STRICT_ROUTES
  log_settings log;
  std::string vendor;                    ///< PRISM_VENDOR
  std::vector<std::string> vendor_path;  ///< PRISM_VENDOR_PATH, ':'-separated
  /// One message per PRISM_* name no part of prism reads (a misspelt variable would otherwise be
  /// ignored silently), with "(did you mean X?)" when a known name is close. The dispatcher
  /// warns with each once, at start-up.
  std::vector<std::string> unknown;
};

/// Every PRISM_* variable some part of prism reads (PRISM_OP_<op> aside), sorted.
const std::vector<std::string>& known_variables();

/// Parses the PRISM_* entries of `env`. Throws errc::config_error naming the variable, the
/// value and the valid values for malformed values (names are validated later, against the
/// op registry: see routing.hpp).
env_settings parse_env(const env_snapshot& env);

/// Splits "a,b , c" into {"a","b","c"} (empty items dropped).
std::vector<std::string> split_list(const std::string& text, char sep);

}  // namespace prism::dispatch
