// SPDX-License-Identifier: Apache-2.0
// Real checkpoints: a Hugging Face model folder (config.json + safetensors, sharded or not) or a
// GGUF file, read into a model_config, model_weights and, when the checkpoint has one, a
// tokenizer and its chat template.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "examples/llm/model_config.hpp"
#include "examples/llm/tokenizer.hpp"
#include "examples/llm/weights.hpp"
#include "prism/io/gguf.hpp"

namespace prism::llm {

/// The model_config of a Hugging Face config.json (Llama, Qwen2, Qwen3 and Mistral families).
/// `source` names the file in errors. Throws prism::error(unsupported) naming an unknown
/// architecture and the known ones, (config_error) naming a missing or malformed field.
model_config config_from_hf_json(std::string_view json_text, const std::string& source);

/// The model_config of a GGUF file's metadata (general.architecture llama, qwen2 or qwen3).
/// Errors as config_from_hf_json, naming the metadata key.
model_config config_from_gguf(const io::gguf_file& file);

/// A loaded checkpoint.
struct checkpoint {
  model_config config;
  model_weights weights;                 ///< empty when the weights went to a device instead
  std::optional<device_weights> device;  ///< open_checkpoint with a queue, Hugging Face folders
  std::shared_ptr<const tokenizer> tok;  ///< null when the checkpoint has none
  std::string chat_template;             ///< the Jinja text, "" when none
};

/// Opens a model folder (config.json, model.safetensors or an index with shards, and
/// tokenizer.json / tokenizer_config.json when present) or a .gguf file. Weights are stored as
/// `type`; the KV cache holds min(max_position_embeddings, max_context) positions. With
/// keep_quantized, a GGUF file's Q8_0/Q4_0/Q4_1 projections and head stay block-quantized.
/// With `device`, a Hugging Face folder's weights load straight onto its device
/// (load_device_weights: the mapped file, no host f32 copies) into `device` and `weights` stays
/// empty (`place`: where on a CPU device, load_device_weights); GGUF files load to host weights
/// as without it.
checkpoint open_checkpoint(const std::string& path, dtype type, std::int64_t max_context,
                           bool keep_quantized = false, const queue* device = nullptr,
                           io::cpu_placement place = io::cpu_placement::mapped);

/// Writes `weights` as a Hugging Face model folder that transformers and open_checkpoint read:
/// config.json (LlamaForCausalLM, Qwen2ForCausalLM or Qwen3ForCausalLM), model.safetensors (f32)
/// and a byte-level tokenizer.json (the 256 bytes, merges of letters up to vocab_size - 3, then
/// <|endoftext|>, <|im_start|>, <|im_end|>) with a ChatML chat template. Needs vocab_size >= 259.
void save_hf_checkpoint(const model_weights& weights, const std::string& dir);

}  // namespace prism::llm
