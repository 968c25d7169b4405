// SPDX-License-Identifier: Apache-2.0
// Token choice from next-token logits: greedy, or temperature / top-k / top-p sampling from a
// seeded generator (the same seed gives the same tokens on every platform).
#pragma once

#include <cstdint>
#include <span>

namespace prism::llm {

struct sampling_options {
  double temperature = 0;  ///< 0: greedy (argmax)
  std::int64_t top_k = 0;  ///< 0: all tokens
  double top_p = 1.0;      ///< nucleus: the smallest set of tokens whose probability reaches top_p
  std::uint64_t seed = 0;

  bool greedy() const { return temperature <= 0; }
  /// Throws prism::error(invalid_argument) naming the bad option and its valid range.
  void validate() const;
};

/// Thread safety: one instance per generation (it owns the generator's state).
class sampler {
 public:
  explicit sampler(const sampling_options& options);
  /// The next token: the argmax when greedy, else a draw from the softmax of logits /
  /// temperature restricted to the top-k and then the top-p tokens.
  std::int32_t sample(std::span<const float> logits);
  const sampling_options& options() const { return options_; }

 private:
  double uniform();  ///< [0, 1), from splitmix64
  sampling_options options_;
  std::uint64_t state_;
};

}  // namespace prism::llm
