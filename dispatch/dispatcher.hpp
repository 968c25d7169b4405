// The per-op dispatcher: routes an op_call to a backend implementation (env > routes file >
// tuning db > vendor profile > built-in order), falls back when the routed one refuses, logs the
// decision, and memoizes routing per (device, op, dtypes, shape, attrs) so the warm path is
// a hash lookup. Internal header: the public API is prism/ops.hpp and prism/dispatch.hpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kernels/op_descriptor.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime/event.hpp"
#include "prism/runtime/queue.hpp"

namespace prism::dispatch {

/// What a dispatch decided and ran.
struct dispatch_result {
  event done;                  ///< the last command's event (complete for the host backend)
  std::string backend;         ///< "opencl", "clblast", "host"
  std::string implementation;  ///< e.g. "opencl.flat", "clblast.gemm", "host.openblas"
  std::string config;          ///< canonical config string ("" = default)
  source_tier tier = source_tier::default_order;
  std::string reason;  ///< origin of the route, or why earlier candidates refused
};

/// A forced choice (prism run --backend/--config, the tuner): skips routing; a backend that
/// cannot serve raises errc::unsupported with its reason (no fallback).
struct forced_route {
  std::string backend;
  std::optional<std::string> config;  ///< nullopt: the backend's default config
};

/// Index of `op` among op_registry::instance().all() (stable for the process). Throws
/// errc::not_found listing valid names.
int op_index(std::string_view op);

/// Routes and runs `call` on `q`. Outputs that are undefined are allocated (contiguous) first.
/// Throws prism::error from the argument checks (nothing enqueued), errc::unsupported when no
/// implementation can serve (or in strict mode when the routed one refuses).
/// Thread safety: safe, from any number of threads on one or several queues.
dispatch_result dispatch_call(queue& q, op_call& call, const forced_route* forced = nullptr);
dispatch_result dispatch_call(queue& q, int op_index, op_call& call);

/// Everything dispatch_call does (output allocation, argument checks, routing, supports())
/// except launching: which implementation and config would serve `call`. Nothing is enqueued,
/// logged or counted (prism run --dry-run style questions, and the overhead benchmark).
dispatch_result plan_call(queue& q, op_call& call);

/// The input dtypes of a call as the dispatch log and the tuning key spell them
/// ("f32|i64|-"). Pretune writes rows under it and dispatch looks them up by it: one definition.
std::string call_dtypes(const op_call& call);

/// The op's opencl default config and search space on `dev`: from the matched vendor profile's
/// own tune_configs.yaml (also for profiles loaded from PRISM_VENDOR_PATH), falling back like
/// load_tune_space (vendor -> generic -> schema default). Use this rather than load_tune_space
/// when the profile may come from PRISM_VENDOR_PATH.
tune_space tune_space_for(const op_descriptor& d, const device& dev);

/// The backends an op can run on, in its built-in order (host last).
std::vector<std::string> op_backends(const op_descriptor& d);

/// Hooks for tests (tests/dispatch). Not for production use.
namespace testing {
/// Drops every memoized decision and re-reads env variables, the routes file and vendor
/// profiles (as if the process had just started); statistics are reset too.
void reload_config();
/// Makes the next `count` launches of `backend` for `op` fail as if enqueue had thrown
/// errc::opencl_error (the dispatcher then falls back, or throws in strict mode).
void inject_launch_failure(const std::string& op, const std::string& backend, int count);
/// Makes the host backend copy buffers (its path on GPUs) instead of mapping them on CPUs.
void host_backend_copies(bool on);
}  // namespace testing

}  // namespace prism::dispatch
