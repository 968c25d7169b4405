// SPDX-License-Identifier: Apache-2.0
// The per-op dispatcher: routes an op_call to a backend implementation (env > routes file >
// tuning db > vendor profile > built-in order), falls back when the routed one refuses, logs the
// decision, and memoizes routing per (device, op, dtypes, shape, attrs) so the warm path is
// a hash lookup. Internal header: the public API is prism/ops.hpp and prism/dispatch.hpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dispatch/backends/backend.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime/event.hpp"
#include "prism/runtime/queue.hpp"
#include "prism/tuning_db.hpp"

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

/// Per-call choices of a dispatch.
struct dispatch_options {
  const forced_route* forced = nullptr;  ///< skip routing (memoized by backend and config text)
  /// Route as if the tuning database had no rows: what pretune measures as the untuned
  /// default. Affects this call only; other threads keep their database answers.
  bool skip_tuning_db = false;
};

/// Index of `op` among op_registry::instance().all() (stable for the process). Throws
/// errc::not_found listing valid names.
int op_index(std::string_view op);

/// Routes and runs `call` on `q`. Outputs that are undefined are allocated (contiguous) first.
/// Throws prism::error from the argument checks (nothing enqueued), errc::unsupported when no
/// implementation can serve (or in strict mode when the routed one refuses).
/// Thread safety: safe, from any number of threads on one or several queues.
dispatch_result dispatch_call(queue& q, op_call& call, const forced_route* forced = nullptr);
dispatch_result dispatch_call(queue& q, op_call& call, const dispatch_options& options);
dispatch_result dispatch_call(queue& q, int op_index, op_call& call);

/// Everything dispatch_call does (output allocation, argument checks, routing, supports())
/// except launching: which implementation and config would serve `call`. Nothing is enqueued,
/// logged or counted (prism run --dry-run style questions, and the overhead benchmark).
dispatch_result plan_call(queue& q, op_call& call, const dispatch_options& options = {});

/// The input dtypes of a call as the dispatch log and the tuning key spell them
/// ("f32|i64|-"). Pretune writes rows under it and dispatch looks them up by it: one definition.
std::string call_dtypes(const op_call& call);

/// The op's opencl default config and search space on `dev`: from the matched vendor profile's
/// tune_configs.yaml (also for profiles loaded from PRISM_VENDOR_PATH), falling back to the
/// generic profile's, then to the schema default.
tune_space tune_space_for(const op_descriptor& d, const device& dev);
/// The same under the loaded profile named `vendor` (errc::not_found listing the loaded names).
tune_space vendor_tune_space(const op_descriptor& d, const std::string& vendor);

/// The hash stored with a tuned row of `d` on `dev` (the backend, its config and the sources it
/// builds under the device's vendor profile): what pretune writes and lookups re-check.
std::string route_hash(const device& dev, const op_descriptor& d, const std::string& backend,
                       const std::string& config);
/// A validator for tuning::database::set_validator / check(): rows of `devices` whose route
/// hash changed are stale. It calls nothing back into the database or the dispatcher.
tuning::row_validator stale_row_validator(const std::vector<device>& devices);

/// The vendor profile that applies to `dev` (with the loaded set, for tune-space fallbacks).
vendor_context device_vendor(const device& dev);

/// The backends that serve an op, in the registry's order (the backend of last resort last).
std::vector<std::string> op_backends(const op_descriptor& d);

/// What the host backend logs once, before its first GEMM, when OpenBLAS picked kernels older than
/// the CPU (`core`: openblas_get_corename()): OpenBLAS 0.3.21 (Debian 12) does not know Sapphire
/// Rapids-class Xeons and runs its Prescott (SSE3) kernels there, 3-5x slower than its SkylakeX
/// ones (benchmarks/RESULTS.md, session 20). The advice names OPENBLAS_CORETYPE; nullopt when the
/// core already uses the CPU's AVX2 / AVX-512 (or the CPU has neither).
std::optional<std::string> blas_core_advice(std::string_view core, bool cpu_avx2, bool cpu_avx512f);

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
