// SPDX-License-Identifier: Apache-2.0
// One op call on random inputs, as `prism run` and dispatch-log replay make it: built by the op
// descriptor's sample builder for a shape key, routed by the dispatcher (or forced), checked
// against the host reference and timed. The CLI reaches ops through this, not the kernels layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/log/dispatch_log.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime/queue.hpp"

namespace prism::dispatch {

/// What to run.
struct run_request {
  std::string op;             ///< a registered op's name
  std::string shape;          ///< its shape key as the dispatch log writes it, e.g. "m=128,n=64,k=32"
  std::string dtype = "f32";  ///< the dtype the sample builder fills the inputs with
  /// With a block-quantized dtype (the weight's): the activations' dtype, f16 or bf16 (a shape
  /// set entry's `act`); "" = f32.
  std::string act;
  std::string attrs;          ///< attributes over the sample's own, e.g. "alpha=2.0;dims=[1]"
  std::uint64_t seed = 1;
  std::string backend;                ///< non-empty: forced, without routing or fallback
  std::optional<std::string> config;  ///< the forced backend's config (nullopt: its default)
  bool check = true;                  ///< false: no host reference (shapes too large for one), timing only
};

/// What served the call (or, for plan_run, would serve it).
struct run_decision {
  std::string backend;
  std::string implementation;
  std::string config;  ///< "" = the backend's default
  source_tier tier = source_tier::default_order;
  std::string reason;
};

struct run_report {
  std::string call;  ///< "add(input=f32[1000], other=f32[1000], out=f32[1000]; alpha=1.0)"
  run_decision decision;
  bool checked = false;  ///< the outputs were compared against the host reference
  bool ok = false;       ///< ... and matched within the op's tolerance
  std::int64_t elements_checked = 0;
  std::string check_message;     ///< the worst element, or why the check failed
  std::vector<double> times_us;  ///< wall time of each timed run, ascending
  double pipelined_us = 0;       ///< wall time per call of `repeat` calls back to back, one wait (0: none)
  double flops = 0;              ///< per call; 0 when the op does not count them
  double bytes = 0;
};

/// The routed decision for the request, without running it (`prism run --dry-run`). Throws
/// errc::invalid_argument for a forced backend (a dry run shows routing), an unknown op (listing
/// the registered ones), a shape key the op's sample builder cannot read, or bad attributes.
run_report plan_run(queue& q, const run_request& r);
/// Runs the request once and checks it against the host reference (unless r.check is false:
/// then report.checked is false and report.ok true), then `repeat` more times,
/// each timed as the whole routine dispatched to an idle queue (as pretune times candidates),
/// then `repeat` more back to back with one wait (report.pipelined_us).
/// Throws like plan_run, and what dispatch throws (errc::unsupported for a forced backend that
/// cannot serve the call).
run_report run_checked(queue& q, const run_request& r, int repeat);

/// The request that reproduces a dispatch log record: its op, shape key, attributes, its
/// backend and config forced, and its dtype (the first defined input's, or a block-quantized
/// weight's with its activations as `act`; for ops without inputs, such as zeros and arange, the
/// record's "dtype" attribute).
run_request request_from_log(const log_record& rec);
/// Replays one dispatch log record: run_checked(q, request_from_log(rec), repeat). Thread
/// safety: as dispatch_call.
run_report replay(queue& q, const log_record& rec, int repeat = 0);

}  // namespace prism::dispatch
