// SPDX-License-Identifier: Apache-2.0
// The prism decoder: the Llama/Qwen-style model run entirely through prism's public op API
// (prism/ops.hpp), so every step is dispatched, routed, tuned and logged like any user call.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "examples/llm/sampling.hpp"
#include "examples/llm/weights.hpp"
#include "prism/ops.hpp"
#include "prism/runtime/graph.hpp"

namespace prism::llm {

/// Time per model step ("qkv_proj", "attention", ...), measured by waiting on the queue after
/// each step: wall time (which includes the wait latency of every command), and the time of
/// the step's op routines summed from the dispatcher's statistics, available when
/// PRISM_LOG_DISPATCH=profile. Only for the breakdown pass: the waits
/// cost throughput.
class step_timer {
 public:
  struct entry {
    double seconds = 0;
    double op_seconds = 0;  ///< summed op routine times (PRISM_LOG_DISPATCH=profile), else 0
    std::uint64_t calls = 0;
  };
  void start(queue& q);
  void stop(queue& q, const char* step);
  const std::map<std::string, entry>& entries() const { return entries_; }
  double total_seconds() const;
  void clear() { entries_.clear(); }

 private:
  std::chrono::steady_clock::time_point t0_;
  std::uint64_t op_ns0_ = 0;
  std::map<std::string, entry> entries_;
};

/// Thread safety: one instance per thread (it owns the KV cache); several decoders may share
/// a queue.
class decoder {
 public:
  /// Uploads the weights to q's device in config().weight_dtype: q/k/v projections fused into
  /// one [q+2kv, hidden] matrix and gate/up into one [2*ffn, hidden] matrix (vLLM's layout, so
  /// silu_and_mul reads the gate/up GEMM's output directly), a KV cache of max_seq_len per layer
  /// and the RoPE cos/sin caches.
  decoder(queue& q, const model_weights& weights);
  /// The same from weights already on q's device in config.weight_dtype (load_device_weights):
  /// tensors are used in place; q/k/v and gate/up are fused as views when the parts lie back to
  /// back in one buffer, else by one copy on the device. Throws prism::error(not_found) naming a
  /// missing weight, (invalid_argument) one of another dtype.
  decoder(queue& q, const device_weights& weights);

  /// Runs `tokens` at positions position() .. position()+n-1 and appends their keys and values
  /// to the cache. Returns the next-token logits (of the last token), [1, vocab], on the device.
  tensor forward(std::span<const std::int32_t> tokens);
  /// Same, with the token ids already on the device (i32/i64 [n]), as produced by argmax: the
  /// decode loop never round-trips a token through the host before it is needed.
  tensor forward(const tensor& token_ids);

  /// Greedy generation: prefill `prompt`, then `new_tokens` argmax steps. Returns the new ids.
  struct generation {
    std::vector<std::int32_t> tokens;
    double prefill_seconds = 0;       ///< prompt forward up to the first token on the host
    double decode_seconds = 0;        ///< the remaining new_tokens - 1 steps
    std::vector<float> first_logits;  ///< the prefill's next-token logits (for dumps and checks)
  };
  /// What generate() does beyond greedy decoding: sample on the host, stop at an end token,
  /// hand each new token to a callback (streaming).
  struct controls {
    sampler* chooser = nullptr;          ///< null: greedy on the device (argmax)
    std::vector<std::int32_t> stop_ids;  ///< generation ends after emitting one of these
    std::function<void(std::int32_t)> on_token;
    /// Each decode step's next-token logits, read to the host (tests, dumps; costs a read).
    std::function<void(const std::vector<float>&)> on_logits;
  };
  generation generate(std::span<const std::int32_t> prompt, std::int64_t new_tokens,
                      const controls* options = nullptr);

  std::int64_t position() const { return pos_; }
  /// Where the constructor's time went: the weights (upload or use in place, q/k/v and gate/up
  /// fusion) and the caches (KV caches zeroed, RoPE table, positions); each up to a queue wait.
  struct setup_times {
    double weights_seconds = 0, caches_seconds = 0;
  };
  const setup_times& setup() const { return setup_; }
  /// How many device buffers hold the weights: 1 when they came through the host path (one
  /// arena, block-quantized weights too) or from one mapped file.
  std::size_t weight_storages() const;
  void reset() { pos_ = 0; }

  /// Decode through a recorded prism::graph: the first decode step records one step (forward of
  /// one token, and argmax when greedy) with the token id and its position in device scalars;
  /// every later step sets those two and replays it. Re-recorded when the dispatcher's
  /// routing_generation() changes (routes, tuning database) or the greedy/sampling mode
  /// changes. Outputs are bit-identical to eager decoding (same kernels, same arguments).
  void set_graph(bool on) { use_graph_ = on; }
  bool graph_enabled() const { return use_graph_; }
  /// Greedy graph decoding with no on_logits callback runs one step ahead of the host: step i + 1
  /// is enqueued before step i's id reaches the host (a non-blocking read ordered after each
  /// replay), so the device does not idle while the host wakes, reads the id and enqueues the
  /// next step. A stop id then leaves one step too many run: its id is dropped and the position
  /// moved back, so position(), the tokens and every later step are as without it (the cache row
  /// it wrote lies at the position the next token overwrites). On by default; off, each step is
  /// read before the next is enqueued.
  void set_run_ahead(bool on) { run_ahead_ = on; }
  bool run_ahead() const { return run_ahead_; }
  /// Whether the block fusion (post_attention) can serve these weights: every layer's norms are
  /// present and its o, gate/up and down weights share one dtype (f32, f16, bf16, or one GGUF block
  /// format read in place).
  bool block_fusable() const { return block_fusable_; }
  /// Whether those block weights are block-quantized (q8_0, q4_0, q4_1).
  bool block_quantized() const {
    return block_fusable_ && !layers_.empty() && is_quantized(layers_[0].o_proj.type());
  }
  /// Commands (kernels and copies) one decode step runs: those of the recorded decode graph,
  /// recording one if needed (nothing runs). Throws what recording throws.
  std::size_t decode_step_commands();
  /// Each command's device time in one decode step: a timed replay (graph::replay_timed) of the
  /// recorded decode graph on a profiling queue of the decoder's context, at the next position
  /// (the step writes that position's cache row, which the next real step overwrites; the
  /// position does not move). Records the graph if needed. Errors: the graph is off, the cache
  /// is full.
  std::vector<graph::command_time> time_decode_step();
  /// The device's own time for one decode step, gaps between kernels included: a plain replay
  /// (events on none of its commands but the last: profiling every command costs the H200 ~3 us
  /// a kernel) on the profiling queue behind device fills of a scratch buffer long enough (25 us
  /// a command) that the host has queued the whole step before the device reaches it; the
  /// step's time is its last command's end minus the last fill's. `queued_ahead`: whether the
  /// host had indeed queued the step's last command before the fills ended (false: the time
  /// includes the host's pace; CPU devices, whose host is the device, run one small fill that marks the
  /// start). Same position rule and errors as time_decode_step.
  struct step_span {
    double seconds = 0;
    bool queued_ahead = false;
  };
  step_span device_step_span();
  /// Which fused ops one-token steps use: decode_attention (q/k norm, RoPE, cache write and
  /// attention in one kernel) and linear_silu_and_mul (gate/up GEMV and SiLU * mul; on
  /// block-quantized weights on CPUs only). Off, the step runs qkv_rope_cache +
  /// kv_cache_attention and linear + silu_and_mul. `norm` (float weights): the residual adds go
  /// into the o/down projections' epilogues (addmm into the residual stream) and each RMSNorm
  /// into the GEMV that reads it (rms_norm_linear, linear_silu_and_mul with a norm weight), so a
  /// layer's norms launch nothing of their own; off, fused_add_rms_norm runs between them.
  /// `block` (with `norm`, float weights): the o projection, the post-attention norm, the gated
  /// MLP and both residual adds as one post_attention call (one launch where the route chains its
  /// GEMVs), so a layer is three calls. All on by default.
  struct fusions {
    bool attention = true;
    bool mlp = true;
    bool norm = true;
    bool block = true;
  };
  /// Drops a recorded decode graph (the next step records the new fusions).
  void set_fusions(fusions f) {
    fusions_ = f;
    decode_graph_ = graph{};
  }
  /// Times the decode graph was recorded (tests: re-recording after a routes change).
  std::uint64_t graph_recordings() const { return graph_recordings_; }

  /// When set, forward() waits after each step and adds its wall time to `timer`.
  void set_timer(step_timer* timer) { timer_ = timer; }
  /// When on, forward() copies the residual stream after each layer to the host (tests).
  void capture_layers(bool on) { capture_ = on; }
  /// The residual stream after `layer` in the last forward(), [n, hidden], as f32.
  const std::vector<float>& layer_output(std::int64_t layer) const { return layer_out_.at(layer); }

  const model_config& config() const { return c_; }
  queue& get_queue() { return q_; }

 private:
  struct layer_weights {
    tensor input_norm, qkv, qkv_bias, q_norm, k_norm, o_proj, post_norm, gate_up, down;
    /// Keys and values in one tensor [2, kv_heads, max_seq, head_dim], so that appending both
    /// is one copy from the adjacent k|v columns of the qkv output.
    tensor kv_cache;
  };
  void step(const char* name);
  void init_caches();  ///< KV caches (zeroed), the RoPE cos/sin table, positions, capture slots
  void build_layers(const std::function<tensor(const std::string&)>& one,
                    const std::function<tensor(const std::vector<std::string>&)>& cat);
  void finish_setup(std::chrono::steady_clock::time_point t0);
  /// The forward pass of `n` tokens at device positions `positions` (i64 [n]); `pos` is their
  /// first position when known on the host (eager), -1 inside a graph recording. One-token steps
  /// never read `pos` (their cache length comes from `positions`), so a recording is always one.
  tensor forward_at(const tensor& token_ids, const tensor& positions, std::int64_t pos);
  tensor forward_fused_norms(tensor& x, const tensor& positions);
  tensor decode_attention_rows(layer_weights& L, const tensor& qkv, const tensor& positions);
  void record_decode_graph(bool greedy);
  /// One decode step through the graph at position pos_, recorded first if needed (or if the
  /// greedy/sampling mode or the routing changed); it reads `id` when given, else the id the
  /// previous replay's argmax left on the device. pos_ moves on by one.
  void replay_step(bool greedy, std::optional<std::int32_t> id);
  /// Throws (naming `where`) when n more tokens do not fit the cache after position pos_.
  void check_room(std::int64_t n, const char* where) const;

  queue& q_;
  model_config c_;
  tensor embed_, final_norm_, lm_head_, cos_sin_;
  tensor positions_;  ///< i64 [max_seq] = 0, 1, ...: a step's positions are a slice, not a dispatch  ///<
                      ///< cos_sin_: [max_seq, head_dim] (cos | sin)
  std::vector<layer_weights> layers_;
  setup_times setup_;
  std::int64_t pos_ = 0;
  step_timer* timer_ = nullptr;
  bool capture_ = false;
  std::vector<std::vector<float>> layer_out_;
  // Decode graph state (set_graph).
  bool use_graph_ = false;
  bool run_ahead_ = true;
  fusions fusions_;
  /// Every layer has the weights the norm fusion reads (set at upload). Block-quantized ones go
  /// through rms_norm_linear's quantized form (the norm applied as the activations are quantized
  /// to int8) and addmm's quantized mat2.
  bool norm_fusable_ = false;
  // post_attention serves every layer: the norm fusion holds and each layer's o, gate/up and down
  // weights share one dtype.
  bool block_fusable_ = false;
  /// linear_silu_and_mul serves the layers' gate/up weights: float ones anywhere; block-quantized
  /// ones on CPUs, whose int8 GEMV has a gate/up pair form (GPUs run them through post_attention,
  /// or rms_norm_linear then silu_and_mul).
  bool mlp_fusable_ = false;
  graph decode_graph_;
  bool graph_greedy_ = true;
  std::uint64_t graph_generation_ = 0;
  std::uint64_t graph_recordings_ = 0;
  std::unique_ptr<graph_param<std::int64_t>> step_id_, step_pos_;
  /// Host slots of run-ahead decoding's id reads: members, so that a read still in flight when
  /// generate() throws writes into memory that outlives the call.
  std::array<std::int64_t, 2> id_slots_{};
  std::optional<queue> timing_queue_;  ///< the timing methods' profiling queue (same context)
  queue& timing_queue();               ///< made on first use
  /// The timing methods' start: the graph on, room for a step, the graph recorded, the position
  /// set; returns the step's command count. Errors name `what`.
  std::size_t prepare_timed_step(const char* what);
  std::optional<buffer<std::uint32_t>> blocker_;  ///< device_step_span's fills
  double blocker_fill_seconds_ = 0;               ///< one fill of blocker_, measured once
  tensor step_id_t_, step_pos_t_, graph_logits_;
};

}  // namespace prism::llm
