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
#include "prism/io/safetensors.hpp"
#include "prism/tensor.hpp"

namespace prism::llm {

/// One weight: its shape and values (row-major, [out, in] for projections as in PyTorch). A
/// weight kept block-quantized (block_type q8_0, q4_0 or q4_1) also holds its blocks, which go
/// to the device as they are; `values` are then their dequantized values (host references).
struct host_tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  dtype block_type = dtype::f32;  ///< f32: not quantized
  std::vector<std::byte> blocks;
  bool quantized() const { return is_quantized(block_type); }
};

/// Which weights `--quantize` turns into blocks, following llama.cpp's llama-quantize: every
/// linear projection of the layers in the requested type; the output head (lm_head, or the
/// tied embedding's copy that the head reads) in q8_0, as llama.cpp keeps the head at 6 bits or
/// more (Q6_K, Q8_0 where rows are not whole 256-element super-blocks); the embedding lookup
/// table, norms and biases stay float.
bool is_linear_weight(const std::string& hf_name);

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
  /// With keep_quantized, Q8_0/Q4_0/Q4_1 projection weights and output head keep their blocks
  /// (host_tensor::blocks) for the device; the embedding table and norms are always float.
  static model_weights load_gguf(const model_config& config, const io::gguf_file& file,
                                 bool keep_quantized = false);

  /// Quantizes the linear weights to `type` (q8_0 or q4_0; see is_linear_weight) and the output
  /// head to q8_0; their values become the dequantized ones. Throws prism::error(invalid_argument)
  /// for other types and for rows that are not whole 32-element blocks, naming the tensor.
  void quantize(dtype type);
  /// The weight the logits projection reads: a tied head's own block-quantized copy of the
  /// embedding when there is one, else get(lm_head_name()).
  const host_tensor& head() const { return head_.quantized() ? head_ : get(lm_head_name()); }

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
  host_tensor head_;  ///< the tied head's blocks (the embedding itself stays float)
};

/// Weights already on a device, by Hugging Face name, each stored as config.weight_dtype:
/// what load_device_weights gives the decoder without host f32 copies.
struct device_weights {
  model_config config;  ///< tie_embeddings set when the checkpoint has no lm_head.weight
  std::map<std::string, tensor> tensors;
  std::uint64_t file_bytes = 0;  ///< the safetensors files' sizes together
};

/// The expected tensors of a safetensors checkpoint (as model_weights::load: one file, or a
/// folder with model.safetensors or an index and its shards) straight onto q's device through
/// io::safetensors_checkpoint::load_named: tensors stored as config.weight_dtype are views of
/// the file's mapping (no copy on CPU devices), others are converted from the mapping into one
/// allocation. The values are bit-identical to uploading model_weights::load's. Errors as
/// model_weights::load, checked before anything loads. `place`: io::cpu_placement (copied
/// puts the weights of a CPU device in prism's own memory, on huge pages: prism-llm --no-mmap).
device_weights load_device_weights(const queue& q, const model_config& config, const std::string& path,
                                   io::cpu_placement place = io::cpu_placement::mapped);

/// Writes config as JSON metadata strings (for the safetensors header) and reads them back.
std::map<std::string, std::string> config_metadata(const model_config& config);

}  // namespace prism::llm
