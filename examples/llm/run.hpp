// SPDX-License-Identifier: Apache-2.0
// One prism-llm run as a library call (used by the executable, the tests and the benchmark):
// options in, measured figures out, plus the text report.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "examples/llm/decoder.hpp"
#include "examples/llm/sampling.hpp"
#include "prism/dispatch.hpp"

namespace prism::llm {

struct run_options {
  std::string preset = "demo";
  std::string dtype = "f32";
  std::string device;  ///< PRISM_DEVICE-style spec; empty: the default selector
  std::string routes;  ///< routes YAML; sets PRISM_ROUTES (must happen before the first dispatch)
  /// Routes every op to this backend (PRISM_OP_<op> for each op the dispatcher knows, unless
  /// already set); ops it cannot serve fall back, as the dispatch log says.
  std::string backend;
  std::string weights;
  std::string save_weights;
  std::string save_model;  ///< write a Hugging Face model folder of the weights in use
  /// A Hugging Face model folder or a .gguf file: config, weights and tokenizer from it.
  std::string model;
  /// A GGUF file's Q8_0/Q4_0/Q4_1 weights are expanded to `dtype` instead of staying quantized.
  bool dequantize = false;
  /// A Hugging Face folder's weights on a CPU device are copied into prism's memory (2 MiB
  /// pages) instead of used in place from the file's mapping: slower to load, faster decode.
  bool no_mmap = false;
  /// "q8_0" or "q4_0": quantize the linear weights at load (weights.hpp: is_linear_weight).
  std::string quantize;
  std::int64_t max_context = 4096;  ///< KV cache positions: min(this, max_position_embeddings)
  std::uint64_t seed = 1;           ///< random weights and prompt, and the sampler
  std::int64_t prompt_len = 32;
  std::string prompt;      ///< text, tokenized with the checkpoint's tokenizer
  std::string prompt_ids;  ///< "1,2,3": explicit token ids
  bool chat = false;       ///< wrap the prompt in the checkpoint's chat format
  std::string system;      ///< the chat's system message
  bool ignore_eos = false;
  bool stream = true;  ///< print the text as it is generated (text prompts)
  sampling_options sampling;
  std::int64_t new_tokens = 32;
  int warmup_runs = 1;
  /// --pretune [SECONDS]: before the warm-up, record this model's shapes (exact, with call
  /// counts) in a short generation, tune them in payoff order into the tuning database within
  /// this budget (0 = no limit; < 0 = off), then run on the new rows.
  double pretune_s = -1;
  std::size_t pretune_candidates = 4;  ///< --pretune-candidates: per backend and shape
  std::string graph = "auto";          ///< decode through a recorded graph: on, off, auto (measured)
  /// "on": greedy graph decoding enqueues step i + 1 before step i's id reaches the host
  /// (llm::decoder::set_run_ahead); "off": each id is read before the next step is enqueued;
  /// "auto": both measured after the warm-up (with --graph auto's probe), the faster runs.
  std::string run_ahead = "auto";
  /// "on": on CPU devices, idle CPUs poll instead of halting while the run generates
  /// (prism::idle_poll, where permitted); "off".
  std::string poll = "on";
  std::string fuse = "auto";  ///< decode fusions: attention, mlp, norm, block (any of them), none, or auto
  int repeat = 1;             ///< timed generations; the fastest prefill and decode are reported
  std::int64_t breakdown_decode_steps = 8;
  bool check = false;
  /// Score the prompt instead of generating: perplexity of each token given those before it.
  bool perplexity = false;
  std::string dump_path;
  std::string json_path;
};

struct run_result {
  std::string model_summary;
  std::string device_name;
  std::string platform_name;
  std::string dtype;
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> tokens;
  std::string text;  ///< the generated tokens decoded, when the checkpoint has a tokenizer
  bool stopped_at_eos = false;
  double weights_seconds = 0, upload_seconds = 0, warmup_seconds = 0;
  /// CPU time (user + system, all threads) of the weight load and the upload: on a busy machine
  /// the wall times above also hold the time spent waiting for a core.
  double weights_cpu_seconds = 0, upload_cpu_seconds = 0;
  /// The checkpoint's load: the weights phase plus the decoder's use of them (upload or use in
  /// place, q/k/v and gate/up fusion; decoder::setup()), without the KV caches and RoPE table
  /// (caches_seconds), which do not depend on the file. load_bytes: the weight files' sizes (0
  /// for random weights); load_path: "device" (a Hugging Face folder mapped straight onto the
  /// device, load_device_weights) or "host" (f32 host arrays, then upload).
  double load_seconds = 0, caches_seconds = 0;
  std::uint64_t load_bytes = 0;
  std::string load_path;
  std::string load_how;  ///< the report's words for how the weights reached the device
  double prefill_seconds = 0, decode_seconds = 0;
  bool graph = false;      ///< decode replayed a recorded graph
  bool run_ahead = false;  ///< greedy graph decode ran one step ahead of the host
  /// --poll: "on" (held), "off" (not asked, or not a CPU device) or "unavailable: <why>".
  std::string idle_poll = "off";
  /// --graph / --run-ahead auto's measurement, seconds a token (0: that mode was not measured)
  double graph_probe_eager_s = 0, graph_probe_graph_s = 0, graph_probe_ahead_s = 0;
  std::string fuse;           ///< the decode fusions used (--fuse auto resolved)
  std::string graph_refused;  ///< --graph auto: why the decode step could not be recorded ("" = it could)
  std::size_t decode_step_commands = 0;  ///< kernels and copies per recorded decode token (0: graph off)
  /// Graph on: the decode step's commands' summed device time (the least of nine timed replays)
  /// and what the best decode time per token spends above it, per command (0: not measured).
  double decode_kernel_seconds = 0, launch_us_per_command = 0;
  /// Graph on: the decode step's device time, gaps between kernels included, the least of five
  /// replays queued ahead of the device (decoder::device_step_span), and whether the host had
  /// queued the whole step before the device started it in that replay (false: the time includes
  /// the host's pace). 0: not measured.
  double decode_step_span_seconds = 0;
  bool decode_step_queued_ahead = false;
  /// That least timed replay's device time per kernel (or command kind), largest first.
  struct kernel_time {
    std::string name;
    std::size_t calls = 0;
    double seconds = 0;
  };
  std::vector<kernel_time> decode_kernels;
  double prefill_tokens_per_s() const { return prefill_seconds > 0 ? prompt.size() / prefill_seconds : 0; }
  double decode_tokens_per_s() const {
    return decode_seconds > 0 && tokens.size() > 1 ? (tokens.size() - 1) / decode_seconds : 0;
  }
  /// Synchronised pass: per-step wall time of the prefill and of `breakdown_decode_steps` steps.
  std::map<std::string, step_timer::entry> prefill_steps, decode_steps;
  std::int64_t breakdown_decode_steps = 0;
  std::vector<dispatch::dispatch_stat> dispatch_stats;  ///< of the timed generations only
  int repeat = 1;
  // --check
  bool checked = false, check_passed = false;
  double logits_max_abs_diff = 0, logits_max_abs_ref = 0, logits_tolerance = 0;
  /// Block-quantized weights: the reference's max |logit difference| between int8 and exact activations.
  double logits_int8_spread = 0;
  std::vector<std::int32_t> reference_tokens;
  // --pretune
  bool pretuned = false;
  std::size_t pretune_recorded = 0, pretune_tuned = 0, pretune_already = 0, pretune_covered = 0,
              pretune_not_reached = 0, pretune_failed = 0;
  double pretune_record_seconds = 0, pretune_seconds = 0;
  std::string pretune_database;
  // --perplexity
  std::int64_t perplexity_tokens = 0;  ///< tokens scored (0: not run)
  double mean_nll = 0, perplexity = 0;
};

/// The random prompt of a seed: ids uniform in [0, vocab).
std::vector<std::int32_t> random_prompt(std::int64_t length, std::int64_t vocab, std::uint64_t seed);
/// Parses "1,2,3"; throws prism::error(invalid_argument) on anything else.
std::vector<std::int32_t> parse_prompt(const std::string& text, std::int64_t vocab);

/// The tolerance of --check and of the tests on the next-token logits:
/// max |prism - reference| <= tol * max(1, max |reference|), tol = 2e-4 for f32 (f32 rounding
/// through a few layers of K <= a few thousand), 1e-2 for f16 and 4e-2 for bf16 (activations
/// rounded to 11 and 8 bits at every step; the tiny preset measures 5e-4 and 5e-3).
double logits_tolerance(dtype t);

run_result run_model(const run_options& options);
void print_report(const run_result& r, std::FILE* out);

}  // namespace prism::llm
