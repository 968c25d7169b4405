// SPDX-License-Identifier: Apache-2.0
// Host reference decoder in double: RMSNorm, GQA attention with NeoX RoPE and a KV cache, SwiGLU.
#include "examples/llm/reference.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "prism/error.hpp"

namespace prism::llm {

namespace {

// x rounded to int8 per 32-block (rows are whole blocks: block-quantized weights have K % 32 == 0),
// as values d * q.
std::vector<double> int8_blocks(const std::vector<double>& x) {
  std::vector<double> y(x.size());
  for (std::size_t b = 0; b < x.size(); b += 32) {
    const std::size_t end = std::min(x.size(), b + 32);
    double amax = 0;
    for (std::size_t i = b; i < end; ++i) amax = std::max(amax, std::abs(x[i]));
    const double d = amax / 127.0;
    for (std::size_t i = b; i < end; ++i) y[i] = d > 0 ? d * std::nearbyint(x[i] / d) : 0.0;
  }
  return y;
}

// y[n, out] = x[n, in] * W[out, in]^T (+ bias); with int8 activations, block-quantized weights
// meet x rounded per 32-block.
std::vector<double> linear(const std::vector<double>& x_in, std::int64_t n, const host_tensor& w,
                           const host_tensor* bias, reference_decoder::activations act) {
  const std::int64_t out = w.shape[0], in = w.shape[1];
  std::vector<double> rounded;
  if (act == reference_decoder::activations::int8 && w.quantized()) rounded = int8_blocks(x_in);
  const std::vector<double>& x = rounded.empty() ? x_in : rounded;
  std::vector<double> y(static_cast<std::size_t>(n * out));
  for (std::int64_t t = 0; t < n; ++t) {
    const double* xr = x.data() + t * in;
    for (std::int64_t o = 0; o < out; ++o) {
      const float* wr = w.values.data() + o * in;
      double acc = bias ? bias->values[o] : 0.0;
      for (std::int64_t i = 0; i < in; ++i) acc += xr[i] * static_cast<double>(wr[i]);
      y[t * out + o] = acc;
    }
  }
  return y;
}

// RMSNorm over rows of width `width`: x * rsqrt(mean(x^2) + eps) * weight.
std::vector<double> rms_norm(const std::vector<double>& x, std::int64_t width, const host_tensor& weight,
                             double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / width; ++r) {
    double ss = 0;
    for (std::int64_t i = 0; i < width; ++i) ss += x[r * width + i] * x[r * width + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(width) + eps);
    for (std::int64_t i = 0; i < width; ++i) y[r * width + i] = x[r * width + i] * inv * weight.values[i];
  }
  return y;
}

// NeoX RoPE (Hugging Face rotate_half) in place on [n, heads, head_dim] at positions pos0 + t.
void rope(std::vector<double>& x, std::int64_t n, std::int64_t heads, std::int64_t head_dim,
          std::int64_t pos0, const std::vector<double>& inv_freqs) {
  const std::int64_t half = head_dim / 2;
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      const double inv_freq = inv_freqs[i];
      const double angle = static_cast<double>(pos0 + t) * inv_freq;
      const double c = std::cos(angle), s = std::sin(angle);
      for (std::int64_t h = 0; h < heads; ++h) {
        double* v = x.data() + (t * heads + h) * head_dim;
        const double x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
      }
    }
}

}  // namespace

bool has_block_weights(const model_weights& weights) {
  bool blocks = weights.head().quantized();
  for (const auto& [name, shape] : model_weights::expected(weights.config()))
    blocks = blocks || weights.get(name).quantized();
  return blocks;
}

double next_token_spread(std::span<const double> a, std::span<const double> b, std::int64_t vocab) {
  double spread = 0;
  for (std::size_t i = a.size() - static_cast<std::size_t>(vocab); i < a.size(); ++i)
    spread = std::max(spread, std::abs(a[i] - b[i]));
  return spread;
}

std::int64_t argmax(std::span<const double> values) {
  return std::max_element(values.begin(), values.end()) - values.begin();
}
std::int64_t argmax(std::span<const float> values) {
  return std::max_element(values.begin(), values.end()) - values.begin();
}

reference_decoder::reference_decoder(const model_weights& weights, activations a)
    : w_(weights), c_(weights.config()), act_(a) {
  const auto cache = static_cast<std::size_t>(c_.num_kv_heads * c_.max_seq_len * c_.head_dim);
  k_cache_.assign(c_.num_layers, std::vector<double>(cache));
  v_cache_.assign(c_.num_layers, std::vector<double>(cache));
  layer_out_.resize(c_.num_layers);
}

std::vector<double> reference_decoder::forward(std::span<const std::int32_t> tokens) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t h = c_.hidden_size, d = c_.head_dim, heads = c_.num_heads, kvh = c_.num_kv_heads;
  if (pos_ + n > c_.max_seq_len)
    throw error(errc::invalid_argument, "llm::reference_decoder",
                fmt::format("position {} + {} tokens exceeds max_seq_len {}", pos_, n, c_.max_seq_len));
  const auto& embed = w_.get("model.embed_tokens.weight");
  std::vector<double> x(static_cast<std::size_t>(n * h));
  for (std::int64_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= c_.vocab_size)
      throw error(errc::invalid_argument, "llm::reference_decoder",
                  fmt::format("token {} outside the vocabulary [0, {})", tokens[t], c_.vocab_size));
    for (std::int64_t i = 0; i < h; ++i) x[t * h + i] = embed.values[tokens[t] * h + i];
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const std::int64_t group = heads / kvh;
  for (std::int64_t l = 0; l < c_.num_layers; ++l) {
    auto W = [&](const char* s) -> const host_tensor& { return w_.get(model_weights::layer_name(l, s)); };
    const auto hn = rms_norm(x, h, W("input_layernorm.weight"), c_.rms_eps);
    auto q = linear(hn, n, W("self_attn.q_proj.weight"),
                    c_.attention_bias ? &W("self_attn.q_proj.bias") : nullptr, act_);
    auto k = linear(hn, n, W("self_attn.k_proj.weight"),
                    c_.attention_bias ? &W("self_attn.k_proj.bias") : nullptr, act_);
    auto v = linear(hn, n, W("self_attn.v_proj.weight"),
                    c_.attention_bias ? &W("self_attn.v_proj.bias") : nullptr, act_);
    if (c_.qk_norm) {
      q = rms_norm(q, d, W("self_attn.q_norm.weight"), c_.rms_eps);
      k = rms_norm(k, d, W("self_attn.k_norm.weight"), c_.rms_eps);
    }
    rope(q, n, heads, d, pos_, c_.rope_inv_freq());
    rope(k, n, kvh, d, pos_, c_.rope_inv_freq());
    auto& kc = k_cache_[l];
    auto& vc = v_cache_[l];
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t g = 0; g < kvh; ++g)
        for (std::int64_t i = 0; i < d; ++i) {
          kc[(g * c_.max_seq_len + pos_ + t) * d + i] = k[(t * kvh + g) * d + i];
          vc[(g * c_.max_seq_len + pos_ + t) * d + i] = v[(t * kvh + g) * d + i];
        }
    std::vector<double> attn(static_cast<std::size_t>(n * heads * d));
    std::vector<double> scores;
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t visible = pos_ + t + 1;  // causal: keys 0 .. pos_+t
      for (std::int64_t hd = 0; hd < heads; ++hd) {
        const std::int64_t g = hd / group;
        const double* qv = q.data() + (t * heads + hd) * d;
        scores.assign(visible, 0.0);
        double mx = -INFINITY;
        for (std::int64_t s = 0; s < visible; ++s) {
          double acc = 0;
          for (std::int64_t i = 0; i < d; ++i) acc += qv[i] * kc[(g * c_.max_seq_len + s) * d + i];
          scores[s] = acc * scale;
          mx = std::max(mx, scores[s]);
        }
        double sum = 0;
        for (auto& sc : scores) sum += (sc = std::exp(sc - mx));
        double* out = attn.data() + (t * heads + hd) * d;
        for (std::int64_t s = 0; s < visible; ++s)
          for (std::int64_t i = 0; i < d; ++i)
            out[i] += scores[s] / sum * vc[(g * c_.max_seq_len + s) * d + i];
      }
    }
    const auto o = linear(attn, n, W("self_attn.o_proj.weight"), nullptr, act_);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const auto hn2 = rms_norm(x, h, W("post_attention_layernorm.weight"), c_.rms_eps);
    const auto gate = linear(hn2, n, W("mlp.gate_proj.weight"), nullptr, act_);
    auto up = linear(hn2, n, W("mlp.up_proj.weight"), nullptr, act_);
    for (std::size_t i = 0; i < up.size(); ++i)
      up[i] *= gate[i] / (1.0 + std::exp(-gate[i]));  // silu(gate) * up
    const auto down = linear(up, n, W("mlp.down_proj.weight"), nullptr, act_);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += down[i];
    layer_out_[l] = x;
  }
  const auto final_norm = rms_norm(x, h, w_.get("model.norm.weight"), c_.rms_eps);
  pos_ += n;
  return linear(final_norm, n, w_.head(), nullptr, act_);
}

std::vector<std::int32_t> reference_decoder::generate(std::span<const std::int32_t> prompt,
                                                      std::int64_t new_tokens) {
  std::vector<std::int32_t> out;
  auto logits = forward(prompt);
  const std::size_t vocab = static_cast<std::size_t>(c_.vocab_size);
  for (std::int64_t i = 0; i < new_tokens; ++i) {
    const auto next =
        static_cast<std::int32_t>(argmax(std::span<const double>(logits).subspan(logits.size() - vocab)));
    out.push_back(next);
    if (i + 1 < new_tokens) logits = forward(std::span<const std::int32_t>(&next, 1));
  }
  return out;
}

}  // namespace prism::llm
