// SPDX-License-Identifier: Apache-2.0
// Sampling: sort candidates by logit, cut to top-k, softmax at the temperature, cut to top-p,
// then one uniform draw (splitmix64, so a seed means the same draws everywhere).
#include "examples/llm/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "prism/error.hpp"

namespace prism::llm {

void sampling_options::validate() const {
  if (!(temperature >= 0) || !std::isfinite(temperature))
    throw error(errc::invalid_argument, "prism-llm --temperature",
                fmt::format("got {}; expected a number >= 0 (0: greedy)", temperature));
  if (top_k < 0)
    throw error(errc::invalid_argument, "prism-llm --top-k",
                fmt::format("got {}; expected >= 0 (0: all)", top_k));
  if (!(top_p > 0 && top_p <= 1))
    throw error(errc::invalid_argument, "prism-llm --top-p",
                fmt::format("got {}; expected 0 < top-p <= 1", top_p));
}

sampler::sampler(const sampling_options& options) : options_(options), state_(options.seed) {
  options.validate();
}

double sampler::uniform() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

std::int32_t sampler::sample(std::span<const float> logits) {
  if (logits.empty()) throw error(errc::invalid_argument, "llm::sampler", "no logits to sample from");
  if (options_.greedy())
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::size_t keep = order.size();
  if (options_.top_k > 0) keep = std::min<std::size_t>(keep, static_cast<std::size_t>(options_.top_k));
  // Ties keep the lower id first, so the order (and the draw) is the same everywhere.
  auto by_logit = [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(), by_logit);
  order.resize(keep);
  std::vector<double> p(keep);
  const double top = logits[order[0]];
  double sum = 0;
  for (std::size_t i = 0; i < keep; ++i)
    sum += p[i] = std::exp((logits[order[i]] - top) / options_.temperature);
  std::size_t cut = keep;
  double mass = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    mass += p[i] / sum;
    if (mass >= options_.top_p) {
      cut = i + 1;
      break;
    }
  }
  double total = 0;
  for (std::size_t i = 0; i < cut; ++i) total += p[i];
  double u = uniform() * total;
  for (std::size_t i = 0; i < cut; ++i) {
    u -= p[i];
    if (u < 0) return order[i];
  }
  return order[cut - 1];
}

}  // namespace prism::llm
