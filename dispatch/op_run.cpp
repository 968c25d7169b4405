// SPDX-License-Identifier: Apache-2.0
// `prism run` and dispatch-log replay (see op_run.hpp): a sample call per request, planned or
// dispatched through the dispatcher, checked against the descriptor's host reference.
#include "dispatch/op_run.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "dispatch/dispatcher.hpp"
#include "dispatch/tuning_tier.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/shape_limits.hpp"
#include "prism/error.hpp"

namespace prism::dispatch {
namespace {

// The request's call: the sample for its shape key, its attributes over the sample's, completed.
op_call build_call(queue& q, const op_descriptor& desc, const run_request& r) {
  if (!desc.sample) throw error(errc::unsupported, "prism run", r.op + " has no sample builder");
  sample_options so;
  so.type = parse_dtype(r.dtype);
  if (!r.act.empty()) {
    if (!is_quantized(so.type))
      throw error(errc::invalid_argument, "prism run",
                  fmt::format("--act {} names a block-quantized weight's activations; --dtype {} is not one "
                              "(valid: q8_0, q4_0, q4_1)",
                              r.act, r.dtype));
    so.act = parse_dtype(r.act);
  }
  so.seed = r.seed;
  // Components are checked against the device before the sample allocates anything.
  check_shape_limits("prism run --shape", r.op, shape_key::parse(r.shape), so.type, q.get_device());
  op_call call;
  try {
    call = desc.sample(q, shape_key::parse(r.shape), so);
  } catch (const error& e) {
    // The sample builder only knows which component is missing; say which op and key it was.
    if (e.code() != errc::not_found && e.code() != errc::invalid_argument) throw;
    const std::string example =
        desc.config_test_shapes.empty() ? "" : " (e.g. --shape " + desc.config_test_shapes.front() + ")";
    throw error(e.code(), "prism run",
                fmt::format("--shape '{}' is not a shape key of {}: {}; expected the components the "
                            "dispatch log shows for {}{}",
                            r.shape, r.op, e.message(), r.op, example));
  }
  if (!r.attrs.empty()) {
    for (auto& [name, value] : parse_attrs(r.attrs)) call.attrs[name] = value;
    call.outputs.clear();
    allocate_outputs(q, desc, call);  // checks the attributes and reshapes the outputs
  }
  complete_attrs(desc, call);
  return call;
}

run_decision decision_of(const dispatch_result& d) {
  return {d.backend, d.implementation, d.config, d.tier, d.reason};
}

}  // namespace

run_report plan_run(queue& q, const run_request& r) {
  if (!r.backend.empty() || r.config)
    throw error(errc::invalid_argument, "prism run --dry-run",
                "shows the routed decision; it does not combine with --backend/--config");
  const auto& desc = op_registry::instance().get(r.op);
  op_call call = build_call(q, desc, r);
  run_report rep;
  rep.decision = decision_of(plan_call(q, call));
  rep.call = describe_call(desc, call);
  return rep;
}

run_report run_checked(queue& q, const run_request& r, int repeat) {
  if (r.config && r.backend.empty())
    throw error(errc::invalid_argument, "prism run", "--config needs --backend (opencl, clblast, host)");
  const auto& desc = op_registry::instance().get(r.op);
  op_call call = build_call(q, desc, r);
  std::vector<host_tensor> expected;
  if (r.check) expected = compute_reference(q, desc, call);  // before the op: in-place ops overwrite inputs

  forced_route forced{r.backend, r.config};
  const forced_route* force = r.backend.empty() ? nullptr : &forced;
  auto first = dispatch_call(q, call, force);
  first.done.wait();
  q.wait_and_throw();
  run_report rep;
  rep.call = describe_call(desc, call);
  rep.decision = decision_of(first);
  rep.ok = true;
  if (r.check) {
    std::vector<host_tensor> got;
    for (const auto& t : call.outputs) got.push_back(read_host(q, t));
    const comparison cmp = compare_outputs(desc, call, expected, got);
    rep.checked = true;
    rep.ok = cmp.ok;
    rep.elements_checked = cmp.checked;
    rep.check_message = cmp.message;
  }
  rep.flops = desc.flops ? desc.flops(call) : 0;
  rep.bytes = desc.bytes ? desc.bytes(call) : 0;
  // Wall time of the whole routine: an implementation may enqueue several kernels (GEMM
  // packing, a bias pass) and the event it returns covers only the last one.
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    dispatch_call(q, call, force);
    q.wait();
    rep.times_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  // The same calls back to back with one wait at the end: the device's rate, without the
  // per-call dispatch-to-idle latency (what a model's chain of ops sees).
  if (repeat > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeat; ++i) dispatch_call(q, call, force);
    q.wait();
    rep.pipelined_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / repeat;
  }
  q.wait_and_throw();
  std::sort(rep.times_us.begin(), rep.times_us.end());
  return rep;
}

run_request request_from_log(const log_record& rec) {
  run_request r;
  r.op = rec.op;
  r.shape = rec.shape;
  r.attrs = rec.attrs;
  r.backend = rec.backend;
  r.config = rec.config;
  // The first defined input's dtype ("f32|-|i64"), or a block-quantized weight's ("f32|q4_0|f32":
  // descriptors sample that call with q4_0); ops without inputs name theirs in "dtype".
  std::string first;
  for (std::size_t at = 0; at <= rec.dtypes.size();) {
    const std::size_t bar = std::min(rec.dtypes.find('|', at), rec.dtypes.size());
    std::string t = rec.dtypes.substr(at, bar - at);
    if (!t.empty() && t != "-" && is_quantized(parse_dtype(t))) {
      first = t;
      break;
    }
    if (t != "-" && first.empty()) first = t;
    at = bar + 1;
  }
  if (first.empty()) {
    const attr_map attrs = parse_attrs(rec.attrs);
    auto it = attrs.find("dtype");
    if (it != attrs.end() && std::holds_alternative<std::string>(it->second))
      first = std::get<std::string>(it->second);
  }
  if (!first.empty()) r.dtype = first;
  r.act = std::string(quantized_activations(r.dtype, rec.dtypes));
  return r;
}

run_report replay(queue& q, const log_record& rec, int repeat) {
  return run_checked(q, request_from_log(rec), repeat);
}

}  // namespace prism::dispatch
