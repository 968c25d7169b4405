// SPDX-License-Identifier: Apache-2.0
// PRISM_ROUTES files: `routes: {op: backend | {backend, config}}`, `unused: [op, ...]` and
// `include: file | [files]` (included files first, so the including file's entries win).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dispatch/config/route_condition.hpp"

namespace prism::dispatch {

/// One conditional entry of a routed op (`{when: "m <= 16", backend: opencl, config: ...}`).
struct route_case {
  route_condition when;
  std::string backend;
  std::string config;
  std::string origin;  ///< "<file>:<line>" of the entry
};

/// One routed op and where it was written ("<file>:<line>"). A list of entries puts those with
/// `when` in `cases` (first that holds wins) and the entry without one in backend/config;
/// `backend` is "" when the list has no fallback (the next tier then routes).
struct file_route {
  std::string backend;
  std::string config;  ///< optional canonical config for that backend ("" = its default)
  std::string origin;
  std::vector<route_case> cases;
};

struct routes_config {
  std::map<std::string, file_route> routes;
  std::map<std::string, std::string> unused;  ///< op -> origin
};

/// Loads `path` and its includes (paths relative to the including file). Later entries win:
/// an op routed in a file is removed from that file's includes' unused set, and vice versa.
/// Throws errc::io_error / errc::config_error (file and line) for unreadable or malformed
/// files, unknown keys and include cycles. Names are validated by the caller.
routes_config load_routes_file(const std::string& path);

}  // namespace prism::dispatch
