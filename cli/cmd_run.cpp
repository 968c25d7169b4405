// `prism run`: runs one op on random inputs from its descriptor's sample builder, checks the
// result against the host reference and prints the time and the dispatch decision. Replays a
// dispatch log line with --replay.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include <fmt/format.h>

#include "cli/command.hpp"
#include "dispatch/dispatcher.hpp"
#include "dispatch/log/dispatch_log.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/shape_limits.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime.hpp"

namespace {

struct run_options {
  std::string op, shape, dtype = "f32", backend, config, attrs, replay;
  bool has_config = false;
  bool dry_run = false;
  int repeat = 10;
  std::uint64_t seed = 1;
};

int run(run_options o, const std::string& device_spec) {
  if (!o.replay.empty()) {
    std::stringstream text(prism::dispatch::log_header() + "\n" + o.replay + "\n");
    auto recs = prism::dispatch::parse_log(text);
    if (recs.empty())
      throw prism::error(prism::errc::invalid_argument, "prism run --replay",
                         "not a dispatch log line (expected 'prism_dispatch,v1,exec,...')");
    const auto& r = recs.front();
    o.op = r.op;
    o.shape = r.shape;
    o.dtype = r.dtypes.substr(0, r.dtypes.find('|'));
    if (o.backend.empty()) o.backend = r.backend;
    if (!o.has_config) {
      o.config = r.config;
      o.has_config = true;
    }
    if (o.attrs.empty()) o.attrs = r.attrs;
  }
  if (o.op.empty())
    throw prism::error(prism::errc::invalid_argument, "prism run",
                       "no op given; name one (`prism routes` lists them) or use --replay");
  const auto& desc = prism::op_registry::instance().get(o.op);
  auto dev = prism::cli::pick_device(device_spec);
  prism::queue q(dev);

  prism::sample_options so;
  so.type = prism::parse_dtype(o.dtype);
  so.seed = o.seed;
  if (!desc.sample)
    throw prism::error(prism::errc::unsupported, "prism run", o.op + " has no sample builder");
  // Components are checked against the device before the sample allocates anything.
  prism::check_shape_limits("prism run --shape", o.op, prism::shape_key::parse(o.shape), so.type, dev);
  prism::op_call call;
  try {
    call = desc.sample(q, prism::shape_key::parse(o.shape), so);
  } catch (const prism::error& e) {
    // The sample builder only knows which component is missing; say which op and flag it was.
    if (e.code() != prism::errc::not_found && e.code() != prism::errc::invalid_argument) throw;
    const std::string example =
        desc.config_test_shapes.empty() ? "" : " (e.g. --shape " + desc.config_test_shapes.front() + ")";
    throw prism::error(e.code(), "prism run",
                       fmt::format("--shape '{}' is not a shape key of {}: {}; expected the components "
                                   "the dispatch log shows for {}{}",
                                   o.shape, o.op, e.message(), o.op, example));
  }
  if (!o.attrs.empty()) {
    for (auto& [k, v] : prism::parse_attrs(o.attrs)) call.attrs[k] = v;
    call.outputs.clear();
    prism::allocate_outputs(q, desc, call);
  }
  if (o.dry_run) {
    if (!o.backend.empty() || o.has_config)
      throw prism::error(prism::errc::invalid_argument, "prism run --dry-run",
                         "shows the routed decision; it does not combine with --backend/--config");
    auto plan = prism::dispatch::plan_call(q, call);
    std::printf("op:        %s\n", prism::describe_call(desc, call).c_str());
    std::printf("device:    %s [%s]\n", dev.name().c_str(), dev.fingerprint().hash.c_str());
    std::printf("would run: backend=%s impl=%s config=%s tier=%s reason=%s\n", plan.backend.c_str(),
                plan.implementation.c_str(), plan.config.empty() ? "(default)" : plan.config.c_str(),
                prism::dispatch::source_tier_name(plan.tier), plan.reason.c_str());
    return 0;
  }
  auto expected = prism::compute_reference(q, desc, call);

  prism::dispatch::forced_route forced;
  const bool force = !o.backend.empty() || o.has_config;
  if (force) {
    if (o.backend.empty())
      throw prism::error(prism::errc::invalid_argument, "prism run",
                         "--config needs --backend (opencl, clblast, host)");
    forced.backend = o.backend;
    if (o.has_config) forced.config = o.config;
  }
  auto once = [&] { return prism::dispatch::dispatch_call(q, call, force ? &forced : nullptr); };
  auto res = once();
  res.done.wait();
  q.wait_and_throw();
  std::vector<prism::host_tensor> got;
  for (const auto& t : call.outputs) got.push_back(prism::read_host(q, t));
  auto cmp = prism::compare_outputs(desc, call, expected, got);

  // Wall time of the whole routine, dispatch to an idle queue, as pretune times candidates: an
  // implementation may enqueue several kernels (GEMM packing, a bias pass) and the event it
  // returns covers only the last one.
  std::vector<double> times_us;
  for (int i = 0; i < o.repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    once();
    q.wait();
    times_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  q.wait_and_throw();

  std::printf("op:        %s\n", prism::describe_call(desc, call).c_str());
  std::printf("device:    %s [%s]\n", dev.name().c_str(), dev.fingerprint().hash.c_str());
  std::printf("dispatch:  backend=%s impl=%s config=%s tier=%s reason=%s\n", res.backend.c_str(),
              res.implementation.c_str(), res.config.empty() ? "(default)" : res.config.c_str(),
              prism::dispatch::source_tier_name(res.tier), res.reason.c_str());
  std::printf("check:     %s (%lld elements checked)%s%s\n", cmp.ok ? "PASS" : "FAIL",
              static_cast<long long>(cmp.checked), cmp.message.empty() ? "" : ": ", cmp.message.c_str());
  if (!times_us.empty()) {
    std::sort(times_us.begin(), times_us.end());
    double med = times_us[times_us.size() / 2];
    double flops = desc.flops ? desc.flops(call) : 0, bytes = desc.bytes ? desc.bytes(call) : 0;
    std::printf("time:      min %.2f us, median %.2f us over %d runs (wall, dispatch to idle queue)",
                times_us.front(), med, o.repeat);
    if (flops > 0) std::printf(", %.2f GFLOP/s", flops / (med * 1e3));
    if (bytes > 0) std::printf(", %.2f GB/s", bytes / (med * 1e3));
    std::printf("\n");
  }
  return cmp.ok ? 0 : 1;
}

}  // namespace

PRISM_CLI_COMMAND(30) {
  auto* cmd = app.add_subcommand("run",
                                 "Run one op on random inputs, check it against the host reference, print "
                                 "the time and the dispatch decision");
  auto o = std::make_shared<run_options>();
  cmd->add_option("op", o->op, "Op name (prism routes lists them)");
  cmd->add_option("--shape", o->shape, "Shape key, e.g. m=128,n=4096,k=4096 (as in the dispatch log)");
  cmd->add_option("--dtype", o->dtype, "f32, f16, bf16, i32, i64, bool")->capture_default_str();
  cmd->add_option("--backend", o->backend, "Force a backend: opencl, clblast, host (no fallback)");
  cmd->add_option("--config", o->config,
                  "Backend config, e.g. wg=64,vec=4 or KWG=32,MWG=64 (needs --backend)")
      ->each([o](const std::string&) { o->has_config = true; });
  cmd->add_option("--attrs", o->attrs, "Attributes, e.g. alpha=2.0;dims=[1]");
  cmd->add_option("--repeat", o->repeat, "Timed runs after the checked one")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed of the inputs")->capture_default_str();
  cmd->add_flag("--dry-run", o->dry_run, "Print the routed decision (backend, config, tier) without running");
  cmd->add_option("--replay", o->replay, "A dispatch log line (prism_dispatch,v1,exec,...) to replay");
  cmd->add_option("--device", global.device,
                  std::string("Device (PRISM_DEVICE syntax: ") + prism::device_spec_syntax() + ")");
  cmd->callback([o, &global, &exit_code] { exit_code = run(*o, global.device); });
}
