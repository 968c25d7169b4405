// SPDX-License-Identifier: Apache-2.0
// Routing precedence for one op, from the configuration sources that do not depend on the call:
// env (PRISM_OP_*, PRISM_UNUSED) > routes file (PRISM_ROUTES) > [tuning db, per shape, applied
// by the dispatcher] > vendor profile > the op's built-in implementation order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dispatch/config/env_settings.hpp"
#include "dispatch/config/routes_file.hpp"
#include "dispatch/config/vendor_profile.hpp"
#include "prism/dispatch.hpp"

namespace prism::dispatch {

/// What the router knows of an op: its name and the backends that serve it, in the registry's
/// built-in order (never empty: the last one, the backend of last resort, serves every op and
/// takes ops marked unused), and the kernel files its OpenCL implementations build (what a
/// vendor kernels/ file may replace).
struct op_catalog_entry {
  std::string name;
  std::vector<std::string> backends;
  std::vector<std::string> kernel_files;
  std::vector<std::string> key_names;  ///< the op's shape-key components (conditions read them)
};

struct routing_sources {
  const env_settings* env = nullptr;
  const routes_config* routes = nullptr;   ///< nullptr: no PRISM_ROUTES
  const vendor_profile* vendor = nullptr;  ///< nullptr: no profile matched
};

/// A conditional entry of a routes file or vendor profile, with the tier it came from.
struct conditional_route {
  route_case entry;
  source_tier tier = source_tier::routes;
};

/// The call-independent route of one op.
struct static_route {
  std::string backend;
  std::string config;  ///< from a routes file / vendor entry with a config; "" = default
  source_tier tier = source_tier::default_order;
  std::string origin;
  bool unused = false;
  /// Shape conditions tried before the route above, in precedence order (routes file entries,
  /// then vendor ones); the first that holds for a call's shape key wins (route_for_shape).
  std::vector<conditional_route> cases;
  /// True for env/routes tiers: they outrank the tuning database.
  bool above_db() const { return tier == source_tier::env || tier == source_tier::routes; }
};

static_route resolve_route(const op_catalog_entry& op, const routing_sources& src);

/// The route of one call: the first of `r.cases` whose condition holds for `key` (backend,
/// config, tier and the entry's file:line as origin), else `r` itself without its cases.
static_route route_for_shape(const static_route& r, const shape_key& key);
/// Conditions may also read `esize`: bytes per element of the call's first output (4 for f32,
/// 2 for f16 and bf16), which the dispatcher adds to the shape key for routing only, so that a
/// profile can route 16-bit calls of an op apart from f32 ones.
inline constexpr std::string_view route_esize_component = "esize";
/// And `qbits`: bits per weight value of the call's block-quantized input (8 for q8_0, 4 for q4_0
/// and q4_1; 0 when no input is block-quantized), so that a profile can route weight-only
/// quantized calls of an op apart from float ones.
inline constexpr std::string_view route_qbits_component = "qbits";

/// The candidate order for a call: `first`, then the op's other backends in built-in order.
std::vector<std::string> candidate_order(const op_catalog_entry& op, const std::string& first);

/// Checks every op and backend name in env, routes file and vendor profiles against `catalog`
/// and `backends`, and vendor kernels/ files against the ops' kernel files. Throws
/// errc::not_found naming the source (variable or file:line), the bad name and the valid
/// names; also when a backend does not implement the op routed to it. Conditions naming a
/// component the op's shape key lacks throw errc::config_error listing the valid components.
void validate_sources(const std::vector<op_catalog_entry>& catalog, const std::vector<std::string>& backends,
                      const env_settings& env, const routes_config* routes,
                      const std::vector<vendor_profile>& vendors);

}  // namespace prism::dispatch
