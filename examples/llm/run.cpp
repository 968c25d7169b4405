// run_model: weights, device, warm-up, timed generation, breakdown pass, optional host check.
#include "examples/llm/run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "examples/llm/reference.hpp"
#include "prism/error.hpp"
#include "prism/runtime.hpp"

namespace prism::llm {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::int32_t read_id(queue& q, const tensor& ids) {
  const auto bytes = ids.to_host(q);
  std::int64_t v;
  std::memcpy(&v, bytes.data(), sizeof v);
  return static_cast<std::int32_t>(v);
}

}  // namespace

std::vector<std::int32_t> random_prompt(std::int64_t length, std::int64_t vocab, std::uint64_t seed) {
  std::vector<std::int32_t> out;
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull;
  for (std::int64_t i = 0; i < length; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG; the high bits are fine here
    out.push_back(static_cast<std::int32_t>((state >> 33) % static_cast<std::uint64_t>(vocab)));
  }
  return out;
}

std::vector<std::int32_t> parse_prompt(const std::string& text, std::int64_t vocab) {
  std::vector<std::int32_t> out;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t end = text.find(',', i);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(i, end - i);
    char* rest = nullptr;
    const long v = std::strtol(item.c_str(), &rest, 10);
    if (item.empty() || *rest != '\0' || v < 0 || v >= vocab)
      throw error(errc::invalid_argument, "prism-llm --prompt",
                  fmt::format("'{}' is not a token id in [0, {}); expected comma-separated ids like 1,2,3",
                              item, vocab));
    out.push_back(static_cast<std::int32_t>(v));
    i = end + 1;
  }
  if (out.empty())
    throw error(errc::invalid_argument, "prism-llm --prompt", "the prompt is empty; expected ids like 1,2,3");
  return out;
}

double logits_tolerance(dtype t) {
  switch (t) {
    case dtype::f16:
      return 1e-2;
    case dtype::bf16:
      return 4e-2;
    default:
      return 2e-4;
  }
}

run_result run_model(const run_options& opt) {
  using clock = std::chrono::steady_clock;
  run_result r;
  if (!opt.routes.empty()) {
    if (!std::filesystem::exists(opt.routes))
      throw error(errc::not_found, "prism-llm --routes",
                  fmt::format("routes file '{}' does not exist", opt.routes));
    ::setenv("PRISM_ROUTES", opt.routes.c_str(), 1);  // read once, at the first dispatch
  }
  if (!opt.backend.empty()) {
    const auto& valid = dispatch::backend_names();
    if (std::find(valid.begin(), valid.end(), opt.backend) == valid.end())
      throw error(errc::not_found, "prism-llm --backend",
                  fmt::format("unknown backend '{}'; valid: {}", opt.backend, fmt::join(valid, ", ")));
    for (const auto& op : dispatch::op_names()) {
      std::string var = "PRISM_OP_" + op;
      for (std::size_t p = var.find('.'); p != std::string::npos; p = var.find('.')) var.replace(p, 1, "__");
      ::setenv(var.c_str(), opt.backend.c_str(), 0);  // an explicit PRISM_OP_<op> still wins
    }
  }
  if (opt.new_tokens < 1)
    throw error(errc::invalid_argument, "prism-llm --new-tokens",
                fmt::format("got {}; at least 1 token must be generated", opt.new_tokens));
  model_config config = preset(opt.preset);
  config.weight_dtype = parse_dtype(opt.dtype);
  config.validate();
  r.dtype = dtype_name(config.weight_dtype);

  // Under PRISM_LOG_DISPATCH=profile (or all) the dispatcher times each op's whole routine on a
  // drained queue and sums it per op; the breakdown then shows that time per step.
  queue q = opt.device.empty() ? queue(default_selector_v) : queue(devices_matching(opt.device).front());
  dispatch::init();  // fail early on bad routes / env before spending time on weights
  r.device_name = q.get_device().name();
  r.platform_name = q.get_device().platform_name();

  auto t0 = clock::now();
  const model_weights weights = opt.weights.empty() ? model_weights::random(config, opt.seed)
                                                    : model_weights::load(config, opt.weights);
  r.weights_seconds = seconds_since(t0);
  r.model_summary = weights.config().summary();
  if (!opt.save_weights.empty()) weights.save(opt.save_weights, dtype::f32);

  r.prompt = opt.prompt.empty() ? random_prompt(opt.prompt_len, config.vocab_size, opt.seed)
                                : parse_prompt(opt.prompt, config.vocab_size);
  const auto total = static_cast<std::int64_t>(r.prompt.size()) + opt.new_tokens;
  if (total > config.max_seq_len)
    throw error(errc::invalid_argument, "prism-llm",
                fmt::format("prompt {} + new tokens {} = {} exceeds max_seq_len {} of preset '{}'",
                            r.prompt.size(), opt.new_tokens, total, config.max_seq_len, config.name));

  t0 = clock::now();
  decoder dec(q, weights);
  r.upload_seconds = seconds_since(t0);

  // Warm-up: builds every kernel variant the timed run needs (prefill and decode shapes).
  t0 = clock::now();
  for (int i = 0; i < opt.warmup_runs; ++i) {
    dec.reset();
    dec.generate(r.prompt, std::min<std::int64_t>(opt.new_tokens, 3));
  }
  r.warmup_seconds = seconds_since(t0);

  // Counters of the timed generation alone: a difference of snapshots (resetting them would
  // also empty the dispatcher's exit summary).
  const auto before = dispatch::statistics();
  if (opt.repeat < 1)
    throw error(errc::invalid_argument, "prism-llm --repeat",
                fmt::format("got {}; expected >= 1", opt.repeat));
  r.repeat = opt.repeat;
  dec.reset();
  auto gen = dec.generate(r.prompt, opt.new_tokens);
  for (int i = 1; i < opt.repeat; ++i) {  // best of N: the machine may be busy
    dec.reset();
    const auto again = dec.generate(r.prompt, opt.new_tokens);
    gen.prefill_seconds = std::min(gen.prefill_seconds, again.prefill_seconds);
    gen.decode_seconds = std::min(gen.decode_seconds, again.decode_seconds);
  }
  for (auto s : dispatch::statistics()) {
    for (const auto& b : before)
      if (b.op == s.op && b.backend == s.backend && b.tier == s.tier) {
        s.calls -= b.calls;
        s.fallbacks -= b.fallbacks;
        s.time_ns -= b.time_ns;
      }
    if (s.calls > 0) r.dispatch_stats.push_back(s);
  }
  r.tokens = gen.tokens;
  r.prefill_seconds = gen.prefill_seconds;
  r.decode_seconds = gen.decode_seconds;

  if (opt.breakdown_decode_steps > 0) {
    const std::int64_t steps = std::min<std::int64_t>(
        opt.breakdown_decode_steps, config.max_seq_len - static_cast<std::int64_t>(r.prompt.size()));
    step_timer prefill_timer, decode_timer;
    dec.reset();
    dec.set_timer(&prefill_timer);
    tensor ids = ops::argmax(q, dec.forward(r.prompt), 1);
    prefill_timer.stop(q, "argmax");
    read_id(q, ids);
    dec.set_timer(&decode_timer);
    for (std::int64_t i = 0; i < steps; ++i) {
      ids = ops::argmax(q, dec.forward(ids), 1);
      decode_timer.stop(q, "argmax");
      read_id(q, ids);
    }
    dec.set_timer(nullptr);
    r.prefill_steps = prefill_timer.entries();
    r.decode_steps = decode_timer.entries();
    r.breakdown_decode_steps = steps;
  }

  if (!opt.dump_path.empty()) {
    nlohmann::json j = {{"preset", config.name},      {"dtype", r.dtype},       {"seed", opt.seed},
                        {"weights", opt.weights},     {"prompt", r.prompt},     {"tokens", r.tokens},
                        {"logits", gen.first_logits}, {"device", r.device_name}};
    std::ofstream f(opt.dump_path);
    f << j.dump() << "\n";
    if (!f)
      throw error(errc::io_error, "prism-llm --dump-logits", fmt::format("cannot write '{}'", opt.dump_path));
  }

  if (opt.check) {
    r.checked = true;
    reference_decoder ref(weights);
    const auto ref_logits = ref.forward(r.prompt);
    const std::size_t vocab = static_cast<std::size_t>(config.vocab_size);
    for (std::size_t i = 0; i < vocab; ++i) {
      const double want = ref_logits[ref_logits.size() - vocab + i];
      r.logits_max_abs_ref = std::max(r.logits_max_abs_ref, std::abs(want));
      r.logits_max_abs_diff = std::max(r.logits_max_abs_diff, std::abs(want - gen.first_logits[i]));
    }
    r.logits_tolerance = logits_tolerance(config.weight_dtype) * std::max(1.0, r.logits_max_abs_ref);
    ref.reset();
    r.reference_tokens = ref.generate(r.prompt, opt.new_tokens);
    r.check_passed = r.logits_max_abs_diff <= r.logits_tolerance &&
                     (config.weight_dtype != dtype::f32 || r.reference_tokens == r.tokens);
  }

  if (!opt.json_path.empty()) {
    nlohmann::json j = {{"model", r.model_summary},
                        {"preset", config.name},
                        {"dtype", r.dtype},
                        {"device", r.device_name},
                        {"platform", r.platform_name},
                        {"prompt_tokens", r.prompt.size()},
                        {"new_tokens", r.tokens.size()},
                        {"repeat", opt.repeat},
                        {"prefill_seconds", r.prefill_seconds},
                        {"decode_seconds", r.decode_seconds},
                        {"prefill_tokens_per_s", r.prefill_tokens_per_s()},
                        {"decode_tokens_per_s", r.decode_tokens_per_s()},
                        {"tokens", r.tokens}};
    nlohmann::json stats = nlohmann::json::array();
    for (const auto& s : r.dispatch_stats)
      stats.push_back({{"op", s.op},
                       {"backend", s.backend},
                       {"tier", dispatch::source_tier_name(s.tier)},
                       {"calls", s.calls},
                       {"fallbacks", s.fallbacks},
                       {"device_ns", s.time_ns}});
    j["dispatch"] = stats;
    std::ofstream f(opt.json_path);
    f << j.dump(2) << "\n";
    if (!f) throw error(errc::io_error, "prism-llm --json", fmt::format("cannot write '{}'", opt.json_path));
  }
  return r;
}

void print_report(const run_result& r, std::FILE* out) {
  auto ids = [](const std::vector<std::int32_t>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) s += ' ';
      s += std::to_string(v[i]);
    }
    return s;
  };
  fmt::print(out, "model   {}\n", r.model_summary);
  fmt::print(out, "device  {} ({})\n", r.device_name, r.platform_name);
  fmt::print(out, "setup   weights {:.2f} s, upload {:.2f} s, warm-up (kernel builds) {:.2f} s\n",
             r.weights_seconds, r.upload_seconds, r.warmup_seconds);
  fmt::print(out, "prompt  {} tokens: {}\n", r.prompt.size(), ids(r.prompt));
  fmt::print(out, "output  {} tokens: {}\n\n", r.tokens.size(), ids(r.tokens));
  fmt::print(out, "prefill {:5} tokens in {:8.3f} s = {:9.1f} tokens/s\n", r.prompt.size(), r.prefill_seconds,
             r.prefill_tokens_per_s());
  if (r.tokens.size() > 1)
    fmt::print(out, "decode  {:5} tokens in {:8.3f} s = {:9.1f} tokens/s ({:.2f} ms/token)\n",
               r.tokens.size() - 1, r.decode_seconds, r.decode_tokens_per_s(),
               1e3 * r.decode_seconds / (r.tokens.size() - 1));

  if (!r.prefill_steps.empty()) {
    // Device time (profiling) when the dispatcher measured it, else wall time with the waits.
    bool per_op = false;
    for (const auto& [k, e] : r.prefill_steps) per_op |= e.op_seconds > 0;
    auto secs = [&](const step_timer::entry& e) { return per_op ? e.op_seconds : e.seconds; };
    double prefill_total = 0, decode_total = 0;
    for (const auto& [k, e] : r.prefill_steps) prefill_total += secs(e);
    for (const auto& [k, e] : r.decode_steps) decode_total += secs(e);
    std::vector<std::string> names;
    for (const auto& [k, e] : r.prefill_steps) names.push_back(k);
    for (const auto& [k, e] : r.decode_steps)
      if (!r.prefill_steps.count(k)) names.push_back(k);
    auto dec_s = [&](const std::string& k) {
      return r.decode_steps.count(k) ? secs(r.decode_steps.at(k)) : 0.0;
    };
    std::sort(names.begin(), names.end(), [&](auto& a, auto& b) { return dec_s(a) > dec_s(b); });
    fmt::print(out,
               "\nper-step {} (a separate pass that waits after every step: prefill of {} tokens, {} decode "
               "steps)\n",
               per_op ? "time of each op's routine on a drained queue (PRISM_LOG_DISPATCH=profile)"
                      : "wall time incl. one queue wait per step (per-op times: PRISM_LOG_DISPATCH=profile)",
               r.prompt.size(), r.breakdown_decode_steps);
    fmt::print(out, "  {:<14} {:>11} {:>7} {:>15} {:>7}\n", "step", "prefill ms", "share", "decode ms/tok",
               "share");
    for (const auto& k : names) {
      const double p = r.prefill_steps.count(k) ? secs(r.prefill_steps.at(k)) : 0.0;
      const double d = dec_s(k);
      fmt::print(out, "  {:<14} {:>11.2f} {:>6.1f}% {:>15.3f} {:>6.1f}%\n", k, 1e3 * p,
                 prefill_total > 0 ? 100 * p / prefill_total : 0.0,
                 r.breakdown_decode_steps ? 1e3 * d / r.breakdown_decode_steps : 0.0,
                 decode_total > 0 ? 100 * d / decode_total : 0.0);
    }
    fmt::print(out, "  {:<14} {:>11.2f} {:>7} {:>15.3f}\n", "total", 1e3 * prefill_total, "",
               r.breakdown_decode_steps ? 1e3 * decode_total / r.breakdown_decode_steps : 0.0);
  }

  if (!r.dispatch_stats.empty()) {
    bool profiled = false;
    for (const auto& s : r.dispatch_stats) profiled |= s.time_ns > 0;
    fmt::print(out,
               "\ndispatches of the {} timed generation{} (op, backend that served it, routing tier: "
               "db-exact / db-nearest = tuning database){}\n",
               r.repeat, r.repeat > 1 ? "s" : "",
               profiled ? ", time per op from PRISM_LOG_DISPATCH=profile" : "");
    fmt::print(out, "  {:<30} {:<8} {:<10} {:>7} {:>9}{}\n", "op", "backend", "tier", "calls", "fallbacks",
               profiled ? "   time ms" : "");
    for (const auto& s : r.dispatch_stats) {
      fmt::print(out, "  {:<30} {:<8} {:<10} {:>7} {:>9}", s.op, s.backend,
                 dispatch::source_tier_name(s.tier), s.calls, s.fallbacks);
      if (profiled) fmt::print(out, "  {:9.2f}", s.time_ns / 1e6);
      fmt::print(out, "\n");
    }
  }

  if (r.checked) {
    fmt::print(
        out,
        "\ncheck vs host reference (double): next-token logits max |diff| {:.3g} (tolerance {:.3g}), "
        "tokens {}: {}\n",
        r.logits_max_abs_diff, r.logits_tolerance,
        r.reference_tokens == r.tokens ? "identical" : "DIFFER (reference: " + ids(r.reference_tokens) + ")",
        r.check_passed ? "PASS" : "FAIL");
  }
  std::fflush(out);
}

}  // namespace prism::llm
