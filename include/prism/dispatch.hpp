// SPDX-License-Identifier: Apache-2.0
// Introspection and control of prism's per-op dispatcher: the effective routes table, vendor
// profiles, dispatch statistics, and the hook through which the tuning database is consulted.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prism/runtime/device.hpp"

namespace prism::dispatch {

/// Where a routing decision came from, highest precedence first (docs/dispatch.md).
/// `fallback` marks a call served by a later implementation because the routed one refused.
enum class source_tier : std::uint8_t { env, routes, db_exact, db_nearest, vendor, default_order, fallback };
/// "env", "routes", "db-exact", "db-nearest", "vendor", "default", "fallback".
const char* source_tier_name(source_tier t) noexcept;

/// Backends prism knows, in built-in preference order: "opencl", "clblast", "host".
const std::vector<std::string>& backend_names();
/// Every op the dispatcher can route (descriptor names, e.g. "add", "mm").
std::vector<std::string> op_names();

/// Reads env variables, the routes file and vendor profiles and validates them. Runs on the
/// first dispatch anyway; call it to fail early. Throws errc::not_found for unknown op, backend
/// or vendor names (listing the valid ones) and errc::config_error for malformed YAML (file and
/// line). Thread safety: safe; runs once.
void init();

/// One row of the effective routes table for a device.
/// A shape condition of a route (`when: "m <= 16"` in a routes file or vendor profile).
struct route_case_info {
  std::string when;     ///< the condition as written
  std::string backend;  ///< the backend that serves calls whose shape key satisfies it
  std::string config;   ///< "" = that backend's default
  source_tier tier;     ///< routes or vendor
  std::string origin;   ///< "<file>:<line>" of the entry
};

struct route_entry {
  std::string op;
  std::string backend;             ///< the backend tried first
  source_tier tier;                ///< env, routes, vendor or default_order (tuning is per shape: see below)
  std::string origin;              ///< e.g. "PRISM_OP_mm", "/path/routes.yaml", "vendor pocl", "built-in"
  bool unused = false;             ///< marked unused (served by host)
  std::vector<std::string> order;  ///< the whole candidate order (backend names)
  /// Shape conditions tried first, in order; `backend` serves the calls none of them takes.
  std::vector<route_case_info> cases;
};
/// The routes the dispatcher would use on `dev`, one entry per op, sorted by op name. Tuning
/// database entries are per shape and are not part of this table (they sit between routes
/// and vendor, see docs/dispatch.md).
std::vector<route_entry> effective_routes(const device& dev);

/// A vendor profile as loaded (vendors/<name>/vendor.yaml).
struct vendor_profile_info {
  std::string name;
  std::string directory;
  int priority = 0;
  std::string match_summary;                  ///< human-readable match rules
  std::vector<std::string> kernel_overrides;  ///< ops with a kernels/<op>.cl file
};
/// All profiles found (shipped + PRISM_VENDOR_PATH), in load order.
std::vector<vendor_profile_info> vendor_profiles();
/// The profile that applies to `dev` (PRISM_VENDOR when set, else the best match).
vendor_profile_info matched_vendor(const device& dev);

/// Per (op, backend, tier) counters since start (or the last reset): `tier` is where the
/// routing came from (db_exact / db_nearest = tuning database hits; fallback = served by a later
/// backend than routed). time_ns is summed only when PRISM_LOG_DISPATCH=profile: each call's
/// whole routine, timed on a drained queue.
struct dispatch_stat {
  std::string op;
  std::string backend;
  source_tier tier = source_tier::default_order;
  std::uint64_t calls = 0;
  std::uint64_t fallbacks = 0;
  std::uint64_t time_ns = 0;
};
std::vector<dispatch_stat> statistics();
void reset_statistics();

/// The dispatch log's settings: what PRISM_LOG_DISPATCH (`mode`), PRISM_LOG_DISPATCH_FILE and
/// PRISM_LOG_DISPATCH_FILTER set at start-up (docs/dispatch.md).
struct log_options {
  std::string mode = "0";  ///< 0 (off), 1, profile, dispatch, all; comma-combinable
  std::string file;        ///< "" = stderr
  std::string filter;      ///< ECMAScript regex; "" = every line
};
log_options get_log_options();
/// Replaces the log settings from now on (routing, memoized decisions and statistics are kept).
/// Throws errc::config_error for a bad mode or filter (listing the valid modes) and what opening
/// the file throws. Thread safety: safe; calls in flight finish with the sink they started with.
void set_log_options(const log_options& options);
/// Writes a "fallback" line to the dispatch log (when it is on): a call of `op` that an embedder
/// served with its own code instead of prism's (the PyTorch bridge falling back to torch), with
/// who served it (`served_by`, the line's backend field) and why. `prism log` counts these
/// lines and does not replay them. Thread safety: safe.
void log_fallback(std::string_view op, std::string_view dtypes, std::string_view shape,
                  std::string_view served_by, std::string_view reason);

// ---- Tuning-database hook ----------------------------------------------------------------
/// What the tuning database proposes for one call.
struct tuned_choice {
  std::string backend;                       ///< "opencl", "clblast", "host"
  std::string config;                        ///< canonical config string of that backend ("" = its default)
  source_tier tier = source_tier::db_exact;  ///< db_exact or db_nearest
  std::string borrowed_shape;                ///< db_nearest: the tuned row's shape key it came from
};
/// The key of a lookup. Strings are views valid during the call only.
struct tuning_query {
  std::string_view device_fingerprint;  ///< device_fingerprint::hash
  std::string_view op;
  std::string_view dtypes;     ///< e.g. "f32" or "f16,f16->f16" (the dispatch log's dtypes field)
  std::string_view shape_key;  ///< the descriptor's canonical key, e.g. "m=128,n=4096,k=4096"
  /// The one dtype `prism pretune` samples this op with to reproduce the call (a shape set's
  /// `dtype`): the first floating-point input's, else the first input's, else the first
  /// output's ("" when the call has neither). What PRISM_RECORD_UNTUNED writes.
  std::string_view sample_dtype;
};
/// Returns a choice, or nullopt when it has nothing for the key. Called once per new
/// (device, op, dtypes, shape key): results are memoized until the next set_tuning_lookup or
/// use_tuning_database. It must be thread-safe and must not dispatch ops itself.
using tuning_lookup = std::function<std::optional<tuned_choice>(const tuning_query&)>;
/// By default tier 3 answers from the process's tuning database (prism/tuning_db.hpp), through
/// each device's own lookup. This replaces it with `lookup` for every device (an embedder's own
/// store, a test's fake); an empty function switches tier 3 off. Clears memoized decisions.
void set_tuning_lookup(tuning_lookup lookup);
/// Back to the tuning database (the default); also makes the dispatcher decide afresh after
/// rows were written to the database. Clears memoized decisions.
void use_tuning_database();

/// Increases whenever the dispatcher may decide differently than before: memoized decisions
/// dropped by set_tuning_lookup / use_tuning_database (rows written, a lookup replaced) or a
/// configuration reload. A recorded prism::graph replays the decisions of its recording; a user
/// that caches graphs re-records them when this changes (prism-llm's decode graph does).
std::uint64_t routing_generation() noexcept;

}  // namespace prism::dispatch
