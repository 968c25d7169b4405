// SPDX-License-Identifier: Apache-2.0
// run_model: weights, device, warm-up, timed generation, breakdown pass, optional host check.
#include "examples/llm/run.hpp"

#include "examples/llm/perplexity.hpp"

#include <sys/resource.h>
#include <unistd.h>
#include <algorithm>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "examples/llm/checkpoint.hpp"
#include "examples/llm/reference.hpp"
#include "examples/llm/unicode.hpp"
#include "prism/dispatch.hpp"
#include "prism/error.hpp"
#include "prism/pretune.hpp"
#include "prism/runtime.hpp"
#include "prism/tuning_db.hpp"

namespace prism::llm {

namespace {

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

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
      throw error(errc::invalid_argument, "prism-llm --prompt-ids",
                  fmt::format("'{}' is not a token id in [0, {}); expected comma-separated ids like 1,2,3",
                              item, vocab));
    out.push_back(static_cast<std::int32_t>(v));
    i = end + 1;
  }
  if (out.empty())
    throw error(errc::invalid_argument, "prism-llm --prompt-ids",
                "the prompt is empty; expected ids like 1,2,3");
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

// --quantize's dtype, checked before any weight is read.
dtype quantize_type(const run_options& opt) {
  const dtype t = opt.quantize == "q8_0" || opt.quantize == "Q8_0"   ? dtype::q8_0
                  : opt.quantize == "q4_0" || opt.quantize == "Q4_0" ? dtype::q4_0
                                                                     : dtype::f32;
  if (t == dtype::f32)
    throw error(errc::invalid_argument, "prism-llm --quantize",
                fmt::format("'{}' is not a quantization prism-llm applies; valid: q8_0, q4_0", opt.quantize));
  if (opt.dequantize)
    throw error(errc::invalid_argument, "prism-llm --quantize",
                "--quantize and --dequantize exclude each other: --quantize requantizes from the dequantized "
                "values anyway");
  return t;
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
  opt.sampling.validate();
  if (!opt.model.empty() && !opt.weights.empty())
    throw error(errc::invalid_argument, "prism-llm --weights",
                "--weights goes with --preset; --model reads the weights of its checkpoint");

  // Under PRISM_LOG_DISPATCH=profile (or all) the dispatcher times each op's whole routine on a
  // drained queue and sums it per op; the breakdown then shows that time per step.
  queue q = opt.device.empty() ? queue(default_selector_v) : queue(devices_matching(opt.device).front());
  dispatch::init();  // fail early on bad routes / env before spending time on weights
  r.device_name = q.get_device().name();
  r.platform_name = q.get_device().platform_name();

  if (!opt.quantize.empty()) quantize_type(opt);  // bad input fails before the weights load
  auto t0 = clock::now();
  double cpu0 = cpu_seconds();
  std::optional<checkpoint> ck;
  model_config config;
  // A Hugging Face folder loads straight onto the device unless the host f32 weights are
  // needed themselves (quantizing, saving); --check reads them apart, after the timed load.
  const bool device_load = !opt.model.empty() && std::filesystem::is_directory(opt.model) &&
                           opt.quantize.empty() && opt.save_weights.empty() && opt.save_model.empty();
  if (!opt.model.empty()) {
    ck = open_checkpoint(opt.model, parse_dtype(opt.dtype), opt.max_context, !opt.dequantize,
                         device_load ? &q : nullptr,
                         opt.no_mmap ? io::cpu_placement::copied : io::cpu_placement::mapped);
    config = ck->config;
  } else {
    config = preset(opt.preset);
    config.weight_dtype = parse_dtype(opt.dtype);
    config.max_seq_len = std::min(config.max_seq_len, opt.max_context);
    config.validate();
  }
  r.dtype = dtype_name(config.weight_dtype);
  model_weights weights = ck                    ? std::move(ck->weights)
                          : opt.weights.empty() ? model_weights::random(config, opt.seed)
                                                : model_weights::load(config, opt.weights);
  if (!opt.quantize.empty()) weights.quantize(quantize_type(opt));
  if (device_load) q.wait();
  r.weights_seconds = seconds_since(t0);
  r.weights_cpu_seconds = cpu_seconds() - cpu0;
  r.model_summary = config.summary();
  if (!device_load) r.model_summary = weights.config().summary();
  r.load_path = device_load ? "device" : "host";
  const bool cpu = q.get_device().type() == device_type::cpu;
  r.load_how = !device_load  ? "host f32 arrays, then upload"
               : !cpu        ? "mapped file straight to device tensors"
               : opt.no_mmap ? "mapped file copied once onto prism's huge pages (--no-mmap)"
                             : "the file's mapping used in place (--no-mmap: a slower load, a faster decode)";
  if (ck && ck->device) {
    r.load_bytes = ck->device->file_bytes;
  } else if (!opt.model.empty() || !opt.weights.empty()) {
    namespace fs = std::filesystem;
    const fs::path file = opt.model.empty() ? fs::path(opt.weights) : fs::path(opt.model);
    if (fs::is_regular_file(file)) {
      r.load_bytes = fs::file_size(file);
    } else if (fs::is_directory(file)) {
      for (const auto& entry : fs::directory_iterator(file))
        if (entry.path().extension() == ".safetensors") r.load_bytes += fs::file_size(entry.path());
    }
  }
  if (!opt.save_weights.empty()) weights.save(opt.save_weights, dtype::f32);
  if (!opt.save_model.empty()) save_hf_checkpoint(weights, opt.save_model);

  const tokenizer* tok = ck && ck->tok ? ck->tok.get() : nullptr;
  decoder::controls controls;
  if (!opt.prompt.empty()) {
    if (!tok)
      throw error(errc::invalid_argument, "prism-llm --prompt",
                  opt.model.empty()
                      ? "a text prompt needs a checkpoint with a tokenizer (--model DIR|FILE.gguf); "
                        "--prompt-ids takes token ids"
                      : fmt::format("'{}' has no tokenizer (tokenizer.json or GGUF tokenizer.ggml.*); "
                                    "--prompt-ids takes token ids",
                                    opt.model));
    if (opt.chat) {
      const auto format = detect_chat_format(ck->chat_template, *tok);
      r.prompt = tok->encode(apply_chat_format(format, opt.system, opt.prompt), false);
      for (const char* end : {"<|im_end|>", "<|eot_id|>"})
        if (tok->token_id(end) >= 0) controls.stop_ids.push_back(tok->token_id(end));
    } else {
      r.prompt = tok->encode(opt.prompt, true);
    }
    if (r.prompt.empty())
      throw error(errc::invalid_argument, "prism-llm --prompt", "the prompt encodes to no tokens");
  } else if (opt.chat) {
    throw error(errc::invalid_argument, "prism-llm --chat", "--chat needs --prompt \"text\"");
  } else if (!opt.prompt_ids.empty()) {
    r.prompt = parse_prompt(opt.prompt_ids, config.vocab_size);
  } else {
    r.prompt = random_prompt(opt.prompt_len, config.vocab_size, opt.seed);
  }
  if (!opt.ignore_eos)
    for (auto id : config.eos_token_ids) controls.stop_ids.push_back(static_cast<std::int32_t>(id));
  const auto total = static_cast<std::int64_t>(r.prompt.size()) + opt.new_tokens;
  if (total > config.max_seq_len)
    throw error(errc::invalid_argument, "prism-llm",
                fmt::format("prompt {} + new tokens {} = {} exceeds max_seq_len {} of model '{}'{}",
                            r.prompt.size(), opt.new_tokens, total, config.max_seq_len, config.name,
                            !opt.model.empty() || opt.max_context < preset(opt.preset).max_seq_len
                                ? " (raise --max-context)"
                                : ""));
  // Streaming: the text of the tokens so far, printed up to the last whole UTF-8 sequence (invalid
  // bytes become U+FFFD, as in Hugging Face's decode); finish() prints what is left.
  struct text_stream {
    const tokenizer* tok;
    std::vector<std::int32_t> generated;
    std::size_t printed = 0;  // raw bytes of the decoded text already printed
    void print_up_to(const std::string& raw, std::size_t end) {
      if (end <= printed) return;
      const auto text = unicode::to_valid_utf8(std::string_view(raw).substr(printed, end - printed));
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      printed = end;
    }
    void push(std::int32_t id) {
      generated.push_back(id);
      const auto raw = tok->decode(generated, true);
      print_up_to(raw, unicode::complete_utf8_prefix(raw));
    }
    void finish() {
      const auto raw = tok->decode(generated, true);
      print_up_to(raw, raw.size());
      std::fputs("\n", stdout);
    }
  };
  auto stream = std::make_shared<text_stream>(text_stream{tok, {}, 0});
  // A fresh sampler per generation: every generation with one seed draws the same tokens.
  auto controls_for = [&](sampler& s, bool streaming) {
    decoder::controls c = controls;
    c.chooser = &s;
    if (streaming && tok && opt.stream && !opt.prompt.empty())
      c.on_token = [stream](std::int32_t id) { stream->push(id); };
    return c;
  };

  t0 = clock::now();
  cpu0 = cpu_seconds();
  decoder dec = ck && ck->device ? decoder(q, *ck->device) : decoder(q, weights);
  if (ck) ck->device.reset();  // the decoder holds what it uses
  {
    decoder::fusions f{false, false, false, false};
    // auto: every fusion. The block (post_attention) on float weights took qwen3-0.6b's f32 decode
    // on the H200 up 8% and bf16 up 10% (benchmarks/RESULTS.md, "Issue 12, session 21"; session
    // 19's first form lost 5-6% in f32); on PoCL its three-launch form is not slower. On
    // block-quantized weights it is for GPUs only: on PoCL its float slot walk ran the small
    // preset's q4_0 decode at 158-172 tokens/s against 514-552 with the tuned int8-activation
    // GEMVs (2-core, "Issue 17, session 22").
    const bool block = dec.block_fusable() && !(dec.block_quantized() && q.get_device().is_cpu());
    const std::string fuse = opt.fuse != "auto" ? opt.fuse
                             : block            ? "attention,mlp,norm,block"
                                                : "attention,mlp,norm";
    r.fuse = fuse;
    std::stringstream list(fuse);
    for (std::string item; std::getline(list, item, ',');) {
      if (item == "attention")
        f.attention = true;
      else if (item == "mlp")
        f.mlp = true;
      else if (item == "norm")
        f.norm = true;
      else if (item == "block")
        f.block = true;
      else if (item != "none")
        throw error(errc::invalid_argument, "prism-llm --fuse",
                    fmt::format("unknown fusion '{}' in '{}'; valid: auto, or attention, mlp, norm, block "
                                "(comma-separated), none",
                                item, opt.fuse));
    }
    dec.set_fusions(f);
  }
  r.upload_seconds = seconds_since(t0);
  r.upload_cpu_seconds = cpu_seconds() - cpu0;
  r.load_seconds = r.weights_seconds + dec.setup().weights_seconds;
  r.caches_seconds = dec.setup().caches_seconds;

  if (opt.perplexity) {
    const auto p = score_perplexity(dec, r.prompt);
    r.perplexity_tokens = p.scored;
    r.mean_nll = p.mean_nll;
    r.perplexity = p.perplexity();
    if (!opt.json_path.empty()) {
      nlohmann::json j = {{"model", r.model_summary},     {"dtype", r.dtype},
                          {"device", r.device_name},      {"quantize", opt.quantize},
                          {"dequantize", opt.dequantize}, {"load_seconds", r.load_seconds},
                          {"load_bytes", r.load_bytes},   {"load_path", r.load_path},
                          {"scored_tokens", p.scored},    {"mean_nll", p.mean_nll},
                          {"perplexity", r.perplexity}};
      std::ofstream f(opt.json_path);
      f << j.dump(2) << "\n";
      if (!f)
        throw error(errc::io_error, "prism-llm --json", fmt::format("cannot write '{}'", opt.json_path));
    }
    return r;
  }

  if (opt.pretune_s >= 0) {
    // --pretune: this model's shapes recorded exactly, with their call counts, during a short
    // generation; then tuned in payoff order (default time x calls) within the budget. The
    // dispatcher picks the new rows up (dispatch::pretune calls use_tuning_database).
    namespace fs = std::filesystem;
    r.pretuned = true;
    t0 = clock::now();
    const fs::path shapes =
        fs::temp_directory_path() / fmt::format("prism-llm-shapes-{}.yaml", static_cast<long>(::getpid()));
    std::error_code ec;
    fs::remove(shapes, ec);
    const std::string previous = tuning::untuned_record_path();
    tuning::set_untuned_record_path(shapes.string(), true);
    dispatch::use_tuning_database();  // decide afresh, so that every shape is looked up (and recorded)
    try {
      dec.reset();
      sampler s(opt.sampling);
      const auto c = controls_for(s, false);
      dec.generate(r.prompt, std::min<std::int64_t>(opt.new_tokens, 8), &c);
      q.wait_and_throw();
    } catch (...) {
      tuning::set_untuned_record_path(previous);
      fs::remove(shapes, ec);
      throw;
    }
    tuning::set_untuned_record_path(previous);  // appends the counts to `shapes`
    r.pretune_record_seconds = seconds_since(t0);
    auto& db = tuning::database::process_default();
    r.pretune_database = db.path();
    if (fs::exists(shapes)) {
      dispatch::pretune_request req;
      req.shapes = tuning::load_shape_set(shapes.string());
      fs::remove(shapes, ec);
      req.shapes.name = r.model_summary;
      r.pretune_recorded = req.shapes.entries.size();
      req.budget_s = opt.pretune_s;
      req.max_candidates = std::max<std::size_t>(opt.pretune_candidates, 1);
      req.on_progress = [](const dispatch::pretune_progress& p) {
        if (!p.line.empty()) std::fprintf(stderr, "%s\n", p.line.c_str());
      };
      const auto summary = dispatch::pretune(q.get_device(), db, req);
      db.checkpoint();
      for (const auto& sh : summary.shapes) {
        if (sh.status == "tuned")
          ++r.pretune_tuned;
        else if (sh.status == "already_tuned")
          ++r.pretune_already;
        else if (sh.status == "covered")
          ++r.pretune_covered;
        else if (sh.status == "failed")
          ++r.pretune_failed;
        else
          ++r.pretune_not_reached;
      }
    }
    r.pretune_seconds = seconds_since(t0);
    std::printf(
        "prism-llm: pretune: %zu shapes recorded in %.1f s; %zu tuned, %zu already tuned, %zu covered by a "
        "KV-length bucket, %zu not reached, %zu failed; %.1f s in all (budget %s), database %s\n",
        r.pretune_recorded, r.pretune_record_seconds, r.pretune_tuned, r.pretune_already, r.pretune_covered,
        r.pretune_not_reached, r.pretune_failed, r.pretune_seconds,
        opt.pretune_s > 0 ? fmt::format("{:g} s", opt.pretune_s).c_str() : "none",
        r.pretune_database.c_str());
    std::fflush(stdout);
  }

  // --poll: PoCL's workers sleep between dependent kernels; idle CPUs that poll wake at once.
  if (opt.poll != "on" && opt.poll != "off")
    throw error(errc::invalid_argument, "prism-llm --poll",
                fmt::format("got '{}'; valid: on, off", opt.poll));
  std::optional<idle_poll> polling;
  if (opt.poll == "on" && q.get_device().type() == device_type::cpu) {
    polling.emplace();
    r.idle_poll = polling->active() ? "on" : "unavailable: " + polling->reason();
  }

  // Warm-up: builds every kernel variant the timed run needs (prefill and decode shapes).
  t0 = clock::now();
  for (int i = 0; i < opt.warmup_runs; ++i) {
    dec.reset();
    sampler s(opt.sampling);
    const auto c = controls_for(s, false);
    dec.generate(r.prompt, std::min<std::int64_t>(opt.new_tokens, 3), &c);
  }
  r.warmup_seconds = seconds_since(t0);

  if (opt.run_ahead != "on" && opt.run_ahead != "off" && opt.run_ahead != "auto")
    throw error(errc::invalid_argument, "prism-llm --run-ahead",
                fmt::format("got '{}'; valid: on, off, auto", opt.run_ahead));
  if (opt.graph != "on" && opt.graph != "off" && opt.graph != "auto")
    throw error(errc::invalid_argument, "prism-llm --graph",
                fmt::format("got '{}'; valid: on, off, auto", opt.graph));
  // The decode modes --graph and --run-ahead leave open: eager, graph, graph one step ahead (greedy
  // graph decoding only). With more than one, "auto" measures them back to back here and the
  // fastest runs: one step ahead gains on PoCL and loses 2-5% on NVIDIA's driver, whose
  // non-blocking reads cost more than the host turn-around they hide (benchmarks/RESULTS.md,
  // "Issue 12, session 21").
  struct decode_mode {
    bool graph, ahead;
  };
  std::vector<decode_mode> modes;
  const bool greedy = opt.sampling.greedy();
  auto allows = [](const std::string& option, bool on) { return option == "auto" || (option == "on") == on; };
  for (const bool g : {false, true})
    for (const bool a : {false, true}) {
      const bool ahead_applies = g && greedy;  // otherwise only a = false exists
      if (allows(opt.graph, g) && (ahead_applies ? allows(opt.run_ahead, a) : !a)) modes.push_back({g, a});
    }
  decode_mode chosen = modes.back();  // unmeasured: graph and one step ahead where allowed
  const std::int64_t probe = std::min<std::int64_t>(opt.new_tokens, 16);
  if (modes.size() > 1 && probe >= 3) {
    std::vector<double> t(modes.size(), 0);
    for (int round = 0; round < 2; ++round)  // the second round counts: the first records and warms
      for (std::size_t m = 0; m < modes.size(); ++m) {
        dec.set_graph(modes[m].graph);
        dec.set_run_ahead(modes[m].ahead);
        dec.reset();
        sampler s(opt.sampling);
        const auto c = controls_for(s, false);
        try {
          const auto probe_run = dec.generate(r.prompt, probe, &c);
          t[m] = probe_run.tokens.size() > 1 ? probe_run.decode_seconds / (probe_run.tokens.size() - 1) : 0;
        } catch (const prism::error& e) {
          // A route that cannot be recorded (a host-backend op): auto decodes eagerly.
          if (!modes[m].graph || modes[0].graph || e.code() != errc::unsupported) throw;
          r.graph_refused = e.what();
          modes.resize(1);
          t.resize(1);
          round = 2;
          break;
        }
      }
    std::size_t best = 0;
    for (std::size_t m = 1; m < modes.size(); ++m)
      if (t[m] <= t[best]) best = m;
    chosen = modes[best];
    for (std::size_t m = 0; m < modes.size() && modes.size() > 1; ++m)
      (!modes[m].graph  ? r.graph_probe_eager_s
       : modes[m].ahead ? r.graph_probe_ahead_s
                        : r.graph_probe_graph_s) = t[m];
  }
  const bool graph_on = chosen.graph;
  dec.set_graph(graph_on);
  dec.set_run_ahead(chosen.ahead);
  r.graph = graph_on;
  r.run_ahead = chosen.ahead;  // a mode is one step ahead only with the graph and greedy decoding

  // Counters of the timed generation alone: a difference of snapshots (resetting them would
  // also empty the dispatcher's exit summary).
  const auto before = dispatch::statistics();
  if (opt.repeat < 1)
    throw error(errc::invalid_argument, "prism-llm --repeat",
                fmt::format("got {}; expected >= 1", opt.repeat));
  r.repeat = opt.repeat;
  dec.reset();
  sampler first_sampler(opt.sampling);
  const auto first_controls = controls_for(first_sampler, true);
  auto gen = dec.generate(r.prompt, opt.new_tokens, &first_controls);
  if (first_controls.on_token) stream->finish();
  for (int i = 1; i < opt.repeat; ++i) {  // best of N: the machine may be busy
    dec.reset();
    sampler s(opt.sampling);
    const auto c = controls_for(s, false);
    const auto again = dec.generate(r.prompt, opt.new_tokens, &c);
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
  r.stopped_at_eos = !gen.tokens.empty() && std::find(controls.stop_ids.begin(), controls.stop_ids.end(),
                                                      gen.tokens.back()) != controls.stop_ids.end();
  if (tok) r.text = unicode::to_valid_utf8(tok->decode(r.tokens, true));
  r.prefill_seconds = gen.prefill_seconds;
  r.decode_seconds = gen.decode_seconds;
  if (graph_on) r.decode_step_commands = dec.decode_step_commands();  // off: nothing is recorded
  // What a step's launches cost: the best decode time per token above the least summed kernel
  // device time of nine timed replays of the step (issue 12's per-dispatch figure).
  if (graph_on && gen.tokens.size() > 1 && r.decode_step_commands > 0 &&
      static_cast<std::int64_t>(r.prompt.size() + gen.tokens.size()) <= config.max_seq_len) {
    double least = std::numeric_limits<double>::infinity();
    std::vector<graph::command_time> fastest;
    for (int i = 0; i < 9; ++i) {
      auto times = dec.time_decode_step();
      double sum = 0;
      for (const auto& t : times) sum += t.seconds;
      if (sum < least) {
        least = sum;
        fastest = std::move(times);
      }
    }
    r.decode_kernel_seconds = least;
    for (const auto& t : fastest) {
      auto at = std::find_if(r.decode_kernels.begin(), r.decode_kernels.end(),
                             [&](const auto& k) { return k.name == t.name; });
      if (at == r.decode_kernels.end())
        at = r.decode_kernels.insert(r.decode_kernels.end(), {t.name, 0, 0.0});
      ++at->calls;
      at->seconds += t.seconds;
    }
    std::stable_sort(r.decode_kernels.begin(), r.decode_kernels.end(),
                     [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
    // The step's device time with every command queued before the device reaches the first:
    // what the device alone takes a token, against which the decode time shows the host's share.
    for (int i = 0; i < 5; ++i) {
      const auto span = dec.device_step_span();
      // A replay queued ahead beats any that was not; among alike, the least time.
      if (r.decode_step_span_seconds == 0 || (span.queued_ahead && !r.decode_step_queued_ahead) ||
          (span.queued_ahead == r.decode_step_queued_ahead && span.seconds < r.decode_step_span_seconds)) {
        r.decode_step_span_seconds = span.seconds;
        r.decode_step_queued_ahead = span.queued_ahead;
      }
    }
    const double per_token = gen.decode_seconds / static_cast<double>(gen.tokens.size() - 1);
    r.launch_us_per_command =
        1e6 * (per_token - r.decode_kernel_seconds) / static_cast<double>(r.decode_step_commands);
  }

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
    nlohmann::json j = {{"preset", config.name},      {"dtype", r.dtype},
                        {"seed", opt.seed},           {"weights", opt.weights},
                        {"prompt", r.prompt},         {"tokens", r.tokens},
                        {"logits", gen.first_logits}, {"device", r.device_name},
                        {"model", opt.model},         {"text", r.text}};
    std::ofstream f(opt.dump_path);
    f << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!f)
      throw error(errc::io_error, "prism-llm --dump-logits", fmt::format("cannot write '{}'", opt.dump_path));
  }

  if (opt.check) {
    r.checked = true;
    if (device_load) weights = model_weights::load(config, opt.model);  // the host reference's copy
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
    r.reference_tokens.resize(std::min(r.reference_tokens.size(), r.tokens.size()));  // prism stopped at EOS
    bool tokens_match = r.reference_tokens == r.tokens;
    // Block-quantized weights: a device may round the activations to int8 per 32-block (llama.cpp's
    // CPU scheme; prism's CPU and dp4a kernels at qa=1) or not. The bound widens by twice the
    // reference's own spread between the two, and the tokens may follow either reference.
    if (has_block_weights(weights)) {
      reference_decoder ref8(weights, reference_decoder::activations::int8);
      r.logits_int8_spread = next_token_spread(ref_logits, ref8.forward(r.prompt), config.vocab_size);
      r.logits_tolerance += 2 * r.logits_int8_spread;
      ref8.reset();
      auto tokens8 = ref8.generate(r.prompt, opt.new_tokens);
      tokens8.resize(r.reference_tokens.size());
      tokens_match = tokens_match || tokens8 == r.tokens;
    }
    r.check_passed =
        r.logits_max_abs_diff <= r.logits_tolerance && (config.weight_dtype != dtype::f32 || tokens_match);
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
                        {"load_seconds", r.load_seconds},
                        {"load_bytes", r.load_bytes},
                        {"load_path", r.load_path},
                        {"weights_seconds", r.weights_seconds},
                        {"upload_seconds", r.upload_seconds},
                        {"caches_seconds", r.caches_seconds},
                        {"prefill_seconds", r.prefill_seconds},
                        {"decode_seconds", r.decode_seconds},
                        {"prefill_tokens_per_s", r.prefill_tokens_per_s()},
                        {"decode_tokens_per_s", r.decode_tokens_per_s()},
                        {"graph", r.graph ? "on" : "off"},
                        {"run_ahead", r.run_ahead ? "on" : "off"},
                        {"graph_refused", r.graph_refused},
                        {"idle_poll", r.idle_poll},
                        {"fuse", r.fuse},
                        {"graph_probe_ms_per_token",
                         {{"eager", 1e3 * r.graph_probe_eager_s},
                          {"graph", 1e3 * r.graph_probe_graph_s},
                          {"graph_ahead", 1e3 * r.graph_probe_ahead_s}}},
                        {"decode_step_commands", r.decode_step_commands},
                        {"decode_kernel_ms_per_token", 1e3 * r.decode_kernel_seconds},
                        {"launch_us_per_command", r.launch_us_per_command},
                        {"decode_step_device_ms", 1e3 * r.decode_step_span_seconds},
                        {"decode_step_queued_ahead", r.decode_step_queued_ahead},
                        {"decode_kernels", nlohmann::json::array()},
                        {"tokens", r.tokens},
                        {"text", r.text},
                        {"stopped_at_eos", r.stopped_at_eos}};
    nlohmann::json stats = nlohmann::json::array();
    for (const auto& s : r.dispatch_stats)
      stats.push_back({{"op", s.op},
                       {"backend", s.backend},
                       {"tier", dispatch::source_tier_name(s.tier)},
                       {"calls", s.calls},
                       {"fallbacks", s.fallbacks},
                       {"device_ns", s.time_ns}});
    j["dispatch"] = stats;
    for (const auto& k : r.decode_kernels)
      j["decode_kernels"].push_back({{"name", k.name}, {"calls", k.calls}, {"us", 1e6 * k.seconds}});
    if (r.pretuned)
      j["pretune"] = {{"recorded", r.pretune_recorded},
                      {"tuned", r.pretune_tuned},
                      {"already_tuned", r.pretune_already},
                      {"covered", r.pretune_covered},
                      {"not_reached", r.pretune_not_reached},
                      {"failed", r.pretune_failed},
                      {"record_seconds", r.pretune_record_seconds},
                      {"seconds", r.pretune_seconds},
                      {"budget_s", opt.pretune_s},
                      {"database", r.pretune_database}};
    std::ofstream f(opt.json_path);
    f << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
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
  fmt::print(
      out,
      "setup   weights {:.2f} s (cpu {:.2f} s), upload {:.2f} s (cpu {:.2f} s), warm-up (kernel builds) "
      "{:.2f} s\n",
      r.weights_seconds, r.weights_cpu_seconds, r.upload_seconds, r.upload_cpu_seconds, r.warmup_seconds);
  if (r.load_bytes > 0)
    fmt::print(out,
               "load    {:.3f} s for {} bytes of weights ({} path: {}); KV caches and RoPE table {:.3f} s\n",
               r.load_seconds, r.load_bytes, r.load_path, r.load_how, r.caches_seconds);
  if (r.perplexity_tokens > 0) {
    fmt::print(out, "perplexity {:.4f} (mean NLL {:.6f} over {} tokens)\n", r.perplexity, r.mean_nll,
               r.perplexity_tokens);
    return;
  }
  fmt::print(out, "prompt  {} tokens: {}\n", r.prompt.size(), ids(r.prompt));
  fmt::print(out, "output  {} tokens{}: {}\n", r.tokens.size(), r.stopped_at_eos ? " (stopped at EOS)" : "",
             ids(r.tokens));
  if (!r.text.empty() || r.stopped_at_eos)
    fmt::print(out, "text    {}\n",
               nlohmann::json(r.text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  fmt::print(out, "\n");
  fmt::print(out, "prefill {:5} tokens in {:8.3f} s = {:9.1f} tokens/s\n", r.prompt.size(), r.prefill_seconds,
             r.prefill_tokens_per_s());
  if (r.tokens.size() > 1)
    fmt::print(out, "decode  {:5} tokens in {:8.3f} s = {:9.1f} tokens/s ({:.2f} ms/token)\n",
               r.tokens.size() - 1, r.decode_seconds, r.decode_tokens_per_s(),
               1e3 * r.decode_seconds / (r.tokens.size() - 1));
  if (r.graph) {
    fmt::print(out, "graph   on{}, {} commands per decode token", r.run_ahead ? ", one step ahead" : "",
               r.decode_step_commands);
    if (r.decode_kernel_seconds > 0)
      fmt::print(out,
                 "; kernels {:.3f} ms of a token (device time), launches {:.2f} us a command above them; "
                 "the step's device span {:.3f} ms ({})",
                 1e3 * r.decode_kernel_seconds, r.launch_us_per_command, 1e3 * r.decode_step_span_seconds,
                 r.decode_step_queued_ahead ? "queued ahead of the device" : "paced by the host's enqueues");
  } else
    fmt::print(out, "graph   off");
  if (!r.graph_refused.empty()) fmt::print(out, " (auto: cannot be recorded: {})", r.graph_refused);
  {
    std::vector<std::string> probed;  // the modes auto measured, in ms a token
    if (r.graph_probe_eager_s > 0) probed.push_back(fmt::format("{:.3f} eager", 1e3 * r.graph_probe_eager_s));
    if (r.graph_probe_graph_s > 0) probed.push_back(fmt::format("{:.3f} graph", 1e3 * r.graph_probe_graph_s));
    if (r.graph_probe_ahead_s > 0)
      probed.push_back(fmt::format("{:.3f} graph one step ahead", 1e3 * r.graph_probe_ahead_s));
    if (!probed.empty()) fmt::print(out, " (auto, ms/token: {})", fmt::join(probed, ", "));
  }
  fmt::print(out, "\n");
  if (r.idle_poll != "off")
    fmt::print(
        out, "poll    {}\n",
        r.idle_poll == "on" ? "on (idle CPUs poll while generating: PM QoS CPU latency 0 us)" : r.idle_poll);
  if (!r.decode_kernels.empty()) {
    // The graph's timed replay, by kernel: where a decode token's device time goes.
    fmt::print(out, "\ndecode kernels (device time of one step, the least of nine timed replays)\n");
    fmt::print(out, "  {:<40} {:>6} {:>10} {:>7}\n", "kernel", "calls", "us", "share");
    for (const auto& k : r.decode_kernels)
      fmt::print(out, "  {:<40} {:>6} {:>10.1f} {:>6.1f}%\n", k.name, k.calls, 1e6 * k.seconds,
                 r.decode_kernel_seconds > 0 ? 100 * k.seconds / r.decode_kernel_seconds : 0.0);
  }

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
        "\ncheck vs host reference (double): next-token logits max |diff| {:.3g} (tolerance {:.3g}{}), "
        "tokens {}: {}\n",
        r.logits_max_abs_diff, r.logits_tolerance,
        r.logits_int8_spread > 0
            ? fmt::format(", of it 2 x {:.3g}: int8 against exact activations in the reference",
                          r.logits_int8_spread)
            : std::string(),
        r.reference_tokens == r.tokens ? "identical" : "DIFFER (reference: " + ids(r.reference_tokens) + ")",
        r.check_passed ? "PASS" : "FAIL");
  }
  std::fflush(out);
}

}  // namespace prism::llm
