// Perplexity of a token sequence, decoding token by token (see perplexity.hpp).
#include "examples/llm/perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "prism/error.hpp"

namespace prism::llm {

double perplexity_result::perplexity() const {
  return std::exp(mean_nll);
}

perplexity_result score_perplexity(decoder& dec, std::span<const std::int32_t> tokens) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (n < 2)
    throw error(errc::invalid_argument, "prism-llm --perplexity",
                fmt::format("needs at least 2 tokens to score, got {}", n));
  if (n > dec.config().max_seq_len)
    throw error(errc::invalid_argument, "prism-llm --perplexity",
                fmt::format("{} tokens exceed the context of {} positions (raise --max-context)", n,
                            dec.config().max_seq_len));
  dec.reset();
  double nll = 0;
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const std::vector<float> logits =
        dec.forward(tokens.subspan(static_cast<std::size_t>(i), 1)).to_floats(dec.get_queue());
    const double top = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float v : logits) sum += std::exp(static_cast<double>(v) - top);
    nll -= static_cast<double>(logits.at(static_cast<std::size_t>(tokens[i + 1]))) - top - std::log(sum);
  }
  perplexity_result r;
  r.scored = n - 1;
  r.mean_nll = nll / static_cast<double>(n - 1);
  return r;
}

}  // namespace prism::llm
