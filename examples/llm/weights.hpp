// SPDX-License-Identifier: Apache-2.0
// Host-side model weights under their Hugging Face Llama names: seeded random init, loading from
// safetensors and GGUF, saving to safetensors. Values are f32, already rounded to the model dtype.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "examples/llm/model_config.hpp"
#include "prism/io/gguf.hpp"

namespace prism::llm {

/// One weight: its shape and values (row-major, [out, in] for projections as in PyTorch).
struct host_tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

/// Every tensor a model_config needs, by Hugging Face name.
class model_weights {
 public:
  /// The tensor names and shapes `config` needs, in a stable order (embedding, layers, norm,
  /// lm_head unless tied).
  static std::vector<std::pair<std::string, std::vector<std::int64_t>>> expected(const model_config& config);

  /// Seeded random weights: projections uniform with variance 1/fan_in (residual outputs scaled
  /// down by 1/sqrt(2*layers)), norms near 1, so activations stay O(1) at any depth and the
  /// logits are peaked enough that greedy choices do not hinge on rounding. Each tensor's stream
  /// depends only on (seed, name). Values are rounded to config.weight_dtype.
  static model_weights random(const model_config& config, std::uint64_t seed);

  /// Reads every expected tensor from a safetensors checkpoint (one file, or a Hugging Face
  /// folder with model.safetensors or an index and its shards; F32/F16/BF16), converting to f32
  /// and rounding to config.weight_dtype. Throws prism::error naming each missing tensor or shape
  /// mismatch. lm_head.weight falls back to the embedding when the file has none.
  static model_weights load(const model_config& config, const std::string& path);
  /// Reads every expected tensor from a GGUF file under llama.cpp's names (token_embd,
  /// blk.N.attn_q, ...), dequantized (F32, F16, BF16, Q8_0, Q4_0, Q4_1) and rounded to
  /// config.weight_dtype; for the llama architecture the q/k rows that llama.cpp's converter
  /// interleaved are put back in Hugging Face's order. Errors as load().
  static model_weights load_gguf(const model_config& config, const io::gguf_file& file);

  /// Writes the weights as safetensors in `type`, with the config in __metadata__.
  void save(const std::string& path, dtype type) const;

  const host_tensor& get(const std::string& name) const;
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const model_config& config() const { return config_; }

  /// "model.layers.3.self_attn.q_proj.weight" from (3, "self_attn.q_proj.weight").
  static std::string layer_name(std::int64_t layer, const std::string& suffix);
  /// The name the logits projection reads: lm_head.weight, or the embedding when tied.
  std::string lm_head_name() const;

 private:
  model_config config_;
  std::map<std::string, host_tensor> tensors_;
};

/// Writes config as JSON metadata strings (for the safetensors header) and reads them back.
std::map<std::string, std::string> config_metadata(const model_config& config);

}  // namespace prism::llm
