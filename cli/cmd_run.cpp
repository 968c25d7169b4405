// SPDX-License-Identifier: Apache-2.0
// `prism run`: runs one op on random inputs from its descriptor's sample builder, checks the
// result against the host reference and prints the time and the dispatch decision. Replays a
// dispatch log line with --replay. All of it goes through dispatch/op_run.hpp.
#include <cstdio>

#include <nlohmann/json.hpp>
#include "cli/command.hpp"

#include "cli/term.hpp"
#include "dispatch/log/dispatch_log.hpp"
#include "dispatch/op_run.hpp"
#include "prism/dispatch.hpp"
#include "prism/runtime.hpp"

namespace {

struct run_options {
  std::string op, shape, dtype = "f32", act, backend, config, attrs, replay;
  bool has_config = false;
  bool dry_run = false;
  bool json = false;
  bool no_check = false;
  int repeat = 10;
  std::uint64_t seed = 1;
};

void print_decision(const char* label, const prism::dispatch::run_decision& d) {
  std::printf("%s backend=%s impl=%s config=%s tier=%s reason=%s\n", label, d.backend.c_str(),
              d.implementation.c_str(), d.config.empty() ? "(default)" : d.config.c_str(),
              prism::dispatch::source_tier_name(d.tier), d.reason.c_str());
}

int run(const run_options& o, const std::string& device_spec) {
  prism::dispatch::run_request r;
  if (!o.replay.empty()) {
    r = prism::dispatch::request_from_log(prism::dispatch::parse_log_line(o.replay));  // v1 or v2
    // Flags given beside --replay win over the line's fields; --dry-run shows how the line's
    // call routes now, so it drops the line's backend and config.
    if (o.dry_run) {
      r.backend.clear();
      r.config.reset();
    }
    if (!o.backend.empty()) r.backend = o.backend;
    if (o.has_config) r.config = o.config;
    if (!o.attrs.empty()) r.attrs = o.attrs;
  } else {
    if (o.op.empty())
      throw prism::error(prism::errc::invalid_argument, "prism run",
                         "no op given; name one (`prism routes` lists them) or use --replay");
    r.op = o.op;
    r.shape = o.shape;
    r.dtype = o.dtype;
    r.act = o.act == "f32" ? "" : o.act;  // f32 is the default
    r.attrs = o.attrs;
    r.backend = o.backend;
    if (o.has_config) r.config = o.config;
  }
  r.seed = o.seed;
  r.check = !o.no_check;
  if (o.no_check && o.dry_run)
    throw prism::error(prism::errc::invalid_argument, "prism run",
                       "--no-check and --dry-run do not combine: a dry run checks nothing");
  auto dev = prism::cli::pick_device(device_spec);
  prism::queue q(dev);

  if (o.json) {
    auto rep = o.dry_run ? prism::dispatch::plan_run(q, r) : prism::dispatch::run_checked(q, r, o.repeat);
    nlohmann::json j = {{"call", rep.call},
                        {"device", dev.name()},
                        {"fingerprint", dev.fingerprint().hash},
                        {"dry_run", o.dry_run},
                        {"backend", rep.decision.backend},
                        {"implementation", rep.decision.implementation},
                        {"config", rep.decision.config},
                        {"tier", prism::dispatch::source_tier_name(rep.decision.tier)},
                        {"reason", rep.decision.reason}};
    if (!o.dry_run) {
      j["check"] = {{"ok", rep.ok},
                    {"skipped", !rep.checked},
                    {"elements", rep.elements_checked},
                    {"message", rep.checked ? rep.check_message : "skipped (--no-check)"}};
      j["times_us"] = rep.times_us;
      j["pipelined_us"] = rep.pipelined_us;
      j["flops"] = rep.flops;
      j["bytes"] = rep.bytes;
    }
    std::printf("%s\n", j.dump(2).c_str());
    return o.dry_run || rep.ok ? prism::cli::exit_ok : prism::cli::exit_check_failed;
  }
  if (o.dry_run) {
    auto plan = prism::dispatch::plan_run(q, r);
    std::printf("op:        %s\n", plan.call.c_str());
    std::printf("device:    %s [%s]\n", dev.name().c_str(), dev.fingerprint().hash.c_str());
    print_decision("would run:", plan.decision);
    return 0;
  }
  auto rep = prism::dispatch::run_checked(q, r, o.repeat);
  std::printf("op:        %s\n", rep.call.c_str());
  std::printf("device:    %s [%s]\n", dev.name().c_str(), dev.fingerprint().hash.c_str());
  print_decision("dispatch: ", rep.decision);
  if (rep.checked)
    std::printf("check:     %s (%lld elements checked)%s%s\n", rep.ok ? "PASS" : "FAIL",
                static_cast<long long>(rep.elements_checked), rep.check_message.empty() ? "" : ": ",
                rep.check_message.c_str());
  else
    std::printf("check:     skipped (--no-check)\n");
  if (!rep.times_us.empty()) {
    const double med = rep.times_us[rep.times_us.size() / 2];
    std::printf("time:      min %.2f us, median %.2f us over %d runs (wall, dispatch to idle queue)",
                rep.times_us.front(), med, o.repeat);
    if (rep.flops > 0) std::printf(", %.2f GFLOP/s", rep.flops / (med * 1e3));
    if (rep.bytes > 0) std::printf(", %.2f GB/s", rep.bytes / (med * 1e3));
    std::printf("\n");
    std::printf("pipelined: %.2f us per call over %d calls back to back", rep.pipelined_us, o.repeat);
    if (rep.flops > 0) std::printf(", %.2f GFLOP/s", rep.flops / (rep.pipelined_us * 1e3));
    if (rep.bytes > 0) std::printf(", %.2f GB/s", rep.bytes / (rep.pipelined_us * 1e3));
    std::printf("\n");
  }
  return rep.ok ? prism::cli::exit_ok : prism::cli::exit_check_failed;
}

}  // namespace

// `prism log replay` runs each line through here, the same path as `prism run --replay`.
int prism::cli::replay_log_line(const std::string& line, const std::string& device_spec, int repeat) {
  run_options o;
  o.replay = line;
  o.repeat = repeat;
  return run(o, device_spec);
}

PRISM_CLI_COMMAND(30) {
  auto* cmd = app.add_subcommand("run",
                                 "Run one op on random inputs, check it against the host reference, print "
                                 "the time and the dispatch decision");
  auto o = std::make_shared<run_options>();
  cmd->add_option("op", o->op, "Op name (prism routes lists them)");
  cmd->add_option("--shape", o->shape, "Shape key, e.g. m=128,n=4096,k=4096 (as in the dispatch log)");
  cmd->add_option("--dtype", o->dtype,
                  "f32, f16, bf16, i32, i64, bool, q8_0, q4_0, q4_1 (linear, addmm, matmul, rms_norm_linear, "
                  "linear_silu_and_mul, post_attention: the weight's)")
      ->capture_default_str();
  cmd->add_option("--act", o->act,
                  "With a block-quantized --dtype: the activations' dtype, f32 (default), f16 or bf16 (a "
                  "16-bit model's decode call; a shape set entry's act)")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--backend", o->backend, "Force a backend: opencl, clblast, host (no fallback)");
  cmd->add_option("--config", o->config,
                  "Backend config, e.g. wg=64,vec=4 or KWG=32,MWG=64 (needs --backend)")
      ->each([o](const std::string&) { o->has_config = true; });
  cmd->add_option("--attrs", o->attrs, "Attributes, e.g. alpha=2.0;dims=[1]");
  cmd->add_option("--repeat", o->repeat,
                  "Timed runs after the checked one, each to an idle queue; then as many back to back (pipelined)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed of the inputs")->capture_default_str();
  cmd->add_flag("--no-check", o->no_check,
                "Skip the host reference (for shapes too large for it); time the op only");
  cmd->add_flag("--dry-run", o->dry_run, "Print the routed decision (backend, config, tier) without running");
  cmd->add_flag("--json", o->json, "Print the call, the decision, the check and the times as JSON");
  cmd->add_option("--replay", o->replay, "A dispatch log line (prism_dispatch,v2,... or v1) to replay");
  cmd->add_option("--device", global.device,
                  std::string("Device (PRISM_DEVICE syntax: ") + prism::device_spec_syntax() + ")");
  cmd->callback([o, &global, &exit_code] { exit_code = run(*o, global.device); });
}
