// SPDX-License-Identifier: Apache-2.0
// Model presets: small ones sized for the 2-core PoCL machine, real shapes for GPU runs.
#include "examples/llm/model_config.hpp"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "prism/error.hpp"

namespace prism::llm {

std::int64_t model_config::parameter_count() const {
  const std::int64_t attn = hidden_size * (q_size() + 2 * kv_size()) + q_size() * hidden_size +
                            (attention_bias ? q_size() + 2 * kv_size() : 0) + (qk_norm ? 2 * head_dim : 0);
  const std::int64_t mlp = 3 * hidden_size * intermediate_size;
  const std::int64_t per_layer = attn + mlp + 2 * hidden_size;
  return vocab_size * hidden_size * (tie_embeddings ? 1 : 2) + num_layers * per_layer + hidden_size;
}

void model_config::validate() const {
  auto fail = [&](const std::string& what) {
    throw error(errc::invalid_argument, "llm::model_config", fmt::format("model '{}': {}", name, what));
  };
  if (hidden_size <= 0 || num_layers <= 0 || num_heads <= 0 || num_kv_heads <= 0 || head_dim <= 0 ||
      intermediate_size <= 0 || vocab_size <= 0 || max_seq_len <= 0)
    fail("every size must be positive");
  if (num_heads % num_kv_heads != 0)
    fail(fmt::format("num_heads {} must be a multiple of num_kv_heads {}", num_heads, num_kv_heads));
  if (head_dim % 2 != 0) fail(fmt::format("head_dim {} must be even for RoPE", head_dim));
  if (!is_floating(weight_dtype))
    fail(fmt::format("dtype {} is not a float type; valid: f32, f16, bf16", dtype_name(weight_dtype)));
  if (rms_eps <= 0 || rope_theta <= 0) fail("rms_eps and rope_theta must be positive");
  if (!rope_freq_factors.empty() && static_cast<std::int64_t>(rope_freq_factors.size()) != head_dim / 2)
    fail(fmt::format("{} RoPE frequency factors for head_dim {}; expected head_dim / 2",
                     rope_freq_factors.size(), head_dim));
  if (rope_scaling != rope_scaling_kind::none && rope_factor <= 0)
    fail("rope_scaling factor must be positive");
  if (rope_scaling == rope_scaling_kind::llama3 &&
      (rope_low_freq_factor <= 0 || rope_high_freq_factor <= rope_low_freq_factor ||
       rope_original_max_positions <= 0))
    fail(
        "llama3 rope_scaling needs 0 < low_freq_factor < high_freq_factor and "
        "original_max_position_embeddings > 0");
}

std::vector<double> model_config::rope_inv_freq() const {
  const std::int64_t half = head_dim / 2;
  std::vector<double> out(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    double f = std::pow(rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (rope_scaling == rope_scaling_kind::linear) {
      f /= rope_factor;
    } else if (rope_scaling == rope_scaling_kind::llama3) {
      // Long wavelengths slowed by `factor`, short ones kept, a smooth blend in between.
      const double low_wavelen = rope_original_max_positions / rope_low_freq_factor;
      const double high_wavelen = rope_original_max_positions / rope_high_freq_factor;
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_wavelen) {
        f /= rope_factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (rope_original_max_positions / wavelen - rope_low_freq_factor) /
                              (rope_high_freq_factor - rope_low_freq_factor);
        f = (1.0 - smooth) * f / rope_factor + smooth * f;
      }
    }
    if (!rope_freq_factors.empty()) f /= rope_freq_factors[static_cast<std::size_t>(i)];
    out[static_cast<std::size_t>(i)] = f;
  }
  return out;
}

std::string model_config::summary() const {
  return fmt::format(
      "{}: hidden {}, {} layers, {} heads ({} kv) x {}, ffn {}, vocab {}, {}{}{}{}, {:.1f}M params", name,
      hidden_size, num_layers, num_heads, num_kv_heads, head_dim, intermediate_size, vocab_size,
      dtype_name(weight_dtype), tie_embeddings ? ", tied embeddings" : "", attention_bias ? ", qkv bias" : "",
      qk_norm ? ", qk-norm" : "", static_cast<double>(parameter_count()) / 1e6);
}

namespace {

struct preset_entry {
  preset_info info;
  model_config config;
};

model_config make(std::string name, std::int64_t hidden, std::int64_t layers, std::int64_t heads,
                  std::int64_t kv, std::int64_t head_dim, std::int64_t ffn, std::int64_t vocab, double theta,
                  double eps, std::int64_t max_seq) {
  model_config c;
  c.name = std::move(name);
  c.hidden_size = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv;
  c.head_dim = head_dim;
  c.intermediate_size = ffn;
  c.vocab_size = vocab;
  c.rope_theta = theta;
  c.rms_eps = eps;
  c.max_seq_len = max_seq;
  return c;
}

const std::vector<preset_entry>& entries() {
  static const auto* table = [] {
    auto* t = new std::vector<preset_entry>;
    t->push_back({{"tiny", "test size: hidden 64, 2 layers, GQA 4/2, vocab 256 (unit tests)"},
                  make("tiny", 64, 2, 4, 2, 16, 160, 256, 10000.0, 1e-5, 128)});
    t->push_back({{"demo", "default: hidden 256, 4 layers, GQA 8/4, vocab 2048 (seconds on 2 CPU cores)"},
                  make("demo", 256, 4, 8, 4, 32, 688, 2048, 10000.0, 1e-5, 512)});
    t->push_back({{"small", "hidden 512, 8 layers, GQA 8/2, vocab 8192 (~1 min on 2 CPU cores)"},
                  make("small", 512, 8, 8, 2, 64, 1408, 8192, 10000.0, 1e-5, 1024)});
    t->push_back(
        {{"llama-mini", "Llama-2-7B proportions scaled down: hidden 1024, 8 layers, 16 heads, vocab 32000"},
         make("llama-mini", 1024, 8, 16, 16, 64, 2752, 32000, 10000.0, 1e-5, 2048)});
    t->push_back(
        {{"tinyllama-1.1b", "TinyLlama-1.1B shape: hidden 2048, 22 layers, GQA 32/4, vocab 32000 (GPU)"},
         make("tinyllama-1.1b", 2048, 22, 32, 4, 64, 5632, 32000, 10000.0, 1e-5, 2048)});
    // Big enough that decode is bound by the weights' bytes, not by kernel launches: what
    // quantized decode on a GPU is measured with (benchmarks/llm/quant-gpu.sh).
    t->push_back({{"llama-2-7b",
                   "Llama-2-7B shape: hidden 4096, 32 layers, 32 heads, vocab 32000 (GPU, 27 GB of f32 "
                   "host memory while loading)"},
                  make("llama-2-7b", 4096, 32, 32, 32, 128, 11008, 32000, 10000.0, 1e-5, 4096)});
    {
      auto q = make("qwen2.5-0.5b", 896, 24, 14, 2, 64, 4864, 151936, 1000000.0, 1e-6, 4096);
      q.tie_embeddings = true;
      q.attention_bias = true;
      t->push_back(
          {{"qwen2.5-0.5b", "Qwen2.5-0.5B shape: hidden 896, 24 layers, GQA 14/2, qkv bias, tied (GPU)"}, q});
    }
    {
      auto q = make("qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 151936, 1000000.0, 1e-6, 4096);
      q.tie_embeddings = true;
      q.qk_norm = true;
      t->push_back(
          {{"qwen3-0.6b", "Qwen3-0.6B shape: hidden 1024, 28 layers, GQA 16/8 x 128, qk-norm, tied (GPU)"},
           q});
    }
    return t;
  }();
  return *table;
}

}  // namespace

const std::vector<preset_info>& presets() {
  static const auto* infos = [] {
    auto* v = new std::vector<preset_info>;
    for (const auto& e : entries()) v->push_back(e.info);
    return v;
  }();
  return *infos;
}

model_config preset(std::string_view name) {
  std::string valid;
  for (const auto& e : entries()) {
    if (e.info.name == name) return e.config;
    valid += (valid.empty() ? "" : ", ") + e.info.name;
  }
  throw error(errc::not_found, "llm::preset", fmt::format("unknown preset '{}'; valid: {}", name, valid));
}

}  // namespace prism::llm
