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
  explicit reference_decoder(const model_weights& weights);

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
  std::int64_t pos_ = 0;
  std::vector<std::vector<double>> k_cache_, v_cache_;  ///< per layer [kv_heads, max_seq, head_dim]
  std::vector<std::vector<double>> layer_out_;
};

/// Index of the largest value; the first one on ties (as prism's argmax and torch.argmax).
std::int64_t argmax(std::span<const double> values);
std::int64_t argmax(std::span<const float> values);

}  // namespace prism::llm
