// Perplexity of a token sequence under the prism decoder: what the quantization accuracy tests
// and `prism-llm --perplexity` measure (llama.cpp's llama-perplexity scores the same way).
#pragma once

#include <cstdint>
#include <span>

#include "examples/llm/decoder.hpp"

namespace prism::llm {

struct perplexity_result {
  std::int64_t scored = 0;  ///< tokens scored: every token after the first
  double mean_nll = 0;      ///< mean of -log p(token i | tokens < i), natural log
  double perplexity() const;
};

/// Feeds `tokens` one at a time from position 0 (the decode path: M = 1 GEMVs) and sums the
/// negative log-likelihood of each next token under the logits (log-softmax in double). Throws
/// prism::error(invalid_argument) for fewer than two tokens or more than the model's context.
perplexity_result score_perplexity(decoder& dec, std::span<const std::int32_t> tokens);

}  // namespace prism::llm
