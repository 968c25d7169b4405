// SPDX-License-Identifier: Apache-2.0
// The decoder's shape (Llama / Qwen2 / Qwen3 family) and the named presets offered by --preset.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "prism/dtype.hpp"

namespace prism::llm {

/// Everything that fixes the model's tensors and arithmetic. Field names follow the Hugging Face
/// config.json keys where one exists.
struct model_config {
  std::string name = "demo";
  std::int64_t hidden_size = 256;
  std::int64_t num_layers = 4;
  std::int64_t num_heads = 8;
  std::int64_t num_kv_heads = 4;  ///< < num_heads: grouped-query attention
  std::int64_t head_dim = 32;
  std::int64_t intermediate_size = 688;
  std::int64_t vocab_size = 2048;
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  std::int64_t max_seq_len = 512;
  bool tie_embeddings = false;  ///< lm_head shares model.embed_tokens.weight
  bool attention_bias = false;  ///< Qwen2: q/k/v projections carry a bias
  bool qk_norm = false;         ///< Qwen3: per-head RMSNorm of q and k before RoPE
  dtype weight_dtype = dtype::f32;
  /// RoPE frequency scaling (config.json's rope_scaling / rope_parameters).
  enum class rope_scaling_kind { none, linear, llama3 };
  rope_scaling_kind rope_scaling = rope_scaling_kind::none;
  double rope_factor = 1.0;                   ///< linear and llama3
  double rope_low_freq_factor = 1.0;          ///< llama3
  double rope_high_freq_factor = 4.0;         ///< llama3
  double rope_original_max_positions = 8192;  ///< llama3
  /// Per-frequency divisors (GGUF's rope_freqs.weight, where llama.cpp stores llama3 scaling);
  /// empty: none.
  std::vector<double> rope_freq_factors;
  std::int64_t max_position_embeddings = 0;  ///< the checkpoint's; max_seq_len may be smaller
  /// Mistral-style sliding-window attention span (0: none). prism attends to every cached
  /// position, so a checkpoint with a window runs with max_seq_len <= sliding_window, where the
  /// two agree.
  std::int64_t sliding_window = 0;
  std::string architecture = "llama";  ///< llama, qwen2, qwen3, mistral
  std::int64_t bos_token_id = -1;      ///< -1: none
  std::vector<std::int64_t> eos_token_ids;

  /// RoPE inverse frequencies, head_dim / 2 of them, with the scaling applied as Hugging Face's
  /// _compute_linear_scaling_rope_parameters / _compute_llama3_parameters do.
  std::vector<double> rope_inv_freq() const;

  std::int64_t q_size() const { return num_heads * head_dim; }
  std::int64_t kv_size() const { return num_kv_heads * head_dim; }
  /// Parameter count (embedding and lm_head counted once each unless tied).
  std::int64_t parameter_count() const;
  /// Throws prism::error(invalid_argument) naming the first inconsistent field.
  void validate() const;
  /// One line: "demo: hidden 256, 4 layers, 8 heads (4 kv) x 32, ffn 688, vocab 2048, f32".
  std::string summary() const;
};

/// A preset's name and what it is for (shown by --help and --list-presets).
struct preset_info {
  std::string name;
  std::string description;
};

/// Every preset, smallest first.
const std::vector<preset_info>& presets();
/// The preset's config; throws prism::error(not_found) listing the valid names.
model_config preset(std::string_view name);

}  // namespace prism::llm
