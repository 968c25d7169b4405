// SPDX-License-Identifier: Apache-2.0
// The host reference decoder: the same model as the prism decoder, computed in double on the
// host with no prism ops. It is the ground truth of the tests and of `prism-llm --check`.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "examples/llm/weights.hpp"

namespace prism::llm {

/// Thread safety: one instance per thread (it owns a KV cache).
class reference_decoder {
 public:
  /// How the linears with block-quantized weights (q8_0, q4_0, q4_1) meet their activations.
  enum class activations {
    exact,  ///< as they are (double), against the dequantized weights
    int8,   ///< rounded to int8 per 32-block first (d = max|a| / 127, q = round(a / d)): llama.cpp's CPU
            ///< scheme, which prism's CPU and dp4a kernels use at qa=1
  };
  explicit reference_decoder(const model_weights& weights, activations a = activations::exact);

  /// Runs `tokens` at positions position() .. position()+n-1, appending to the KV cache.
  /// Returns the logits of every token, [n, vocab] row-major (last row: next-token logits).
  std::vector<double> forward(std::span<const std::int32_t> tokens);
  /// The residual stream after layer `layer` in the last forward(), [n, hidden].
  const std::vector<double>& layer_output(std::int64_t layer) const { return layer_out_.at(layer); }
  std::int64_t position() const { return pos_; }
  void reset() { pos_ = 0; }

  /// Greedy generation: prefill `prompt`, then `new_tokens` steps of argmax.
  std::vector<std::int32_t> generate(std::span<const std::int32_t> prompt, std::int64_t new_tokens);

 private:
  const model_weights& w_;
  const model_config& c_;
  activations act_;
  std::int64_t pos_ = 0;
  std::vector<std::vector<double>> k_cache_, v_cache_;  ///< per layer [kv_heads, max_seq, head_dim]
  std::vector<std::vector<double>> layer_out_;
};

/// Whether any weight the model reads (projections, head) is block-quantized.
bool has_block_weights(const model_weights& weights);

/// max |a - b| over the last `vocab` values (the next-token logits) of two forward() results. With
/// the exact and the int8 reference it is how far rounding activations to int8 per 32-block moves
/// the logits: a device may compute either way, so checks of quantized models widen their bound
/// by twice it.
double next_token_spread(std::span<const double> a, std::span<const double> b, std::int64_t vocab);

/// Index of the largest value; the first one on ties (as prism's argmax and torch.argmax).
std::int64_t argmax(std::span<const double> values);
std::int64_t argmax(std::span<const float> values);

}  // namespace prism::llm
