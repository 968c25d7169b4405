// SPDX-License-Identifier: Apache-2.0
// A BPE tokenizer for Llama/Qwen-family checkpoints: Hugging Face tokenizer.json (byte-level BPE
// as in GPT-2, Llama-3, Qwen2 and SmolLM; Metaspace/SentencePiece-style BPE with byte fallback
// as in Llama-2) and the vocabulary embedded in GGUF (tokenizer.ggml.model gpt2 or llama).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "prism/io/gguf.hpp"

namespace prism::llm {

/// Thread safety: immutable after construction; encode and decode are safe concurrently.
class tokenizer {
 public:
  /// Reads a tokenizer.json text; `source` names it in errors. Throws prism::error
  /// (unsupported) naming a model type, pre-tokenizer, regex or normalizer it does not know and
  /// listing the known ones, (config_error) for malformed JSON.
  static tokenizer from_json(std::string_view json_text, const std::string& source);
  /// Reads tokenizer.ggml.* from a GGUF file's metadata.
  static tokenizer from_gguf(const io::gguf_file& file);

  /// Token ids of `text`. Added and special tokens written in the text are matched as such.
  /// With add_special, the post-processor's tokens (e.g. Llama's BOS) are added, as Hugging
  /// Face's encode(text) does by default.
  std::vector<std::int32_t> encode(std::string_view text, bool add_special = false) const;
  /// The text of `ids` (bytes; a cut may end inside a UTF-8 sequence). Special tokens are
  /// dropped with skip_special, else written as their text; ids without a token are skipped.
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const;

  std::size_t vocab_size() const { return id_to_token_.size(); }
  /// The id of a token's text (as in the vocabulary), or -1.
  std::int32_t token_id(std::string_view token) const;
  const std::string& token_text(std::int32_t id) const;
  bool is_special(std::int32_t id) const;
  /// The kind of pre-tokenization in use: "gpt2", "llama3", "qwen2", "smollm" or "metaspace".
  const std::string& pre_tokenizer_name() const { return pre_name_; }

 private:
  enum class split_kind { gpt2, llama3, qwen2, none };
  struct added_token {
    std::string content;
    std::int32_t id;
    bool special;
  };

  void finish();  // builds the reverse maps, sorts added tokens
  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const;
  void bpe(std::vector<std::string>& symbols) const;
  void pre_tokenize(std::string_view text, std::vector<std::string_view>& pieces) const;

  bool byte_level_ = true;  ///< GPT-2 byte-to-unicode mapping (else SentencePiece style)
  split_kind split_ = split_kind::gpt2;
  bool split_digits_ = false;      ///< each digit its own piece first (SmolLM)
  bool add_prefix_space_ = false;  ///< ByteLevel add_prefix_space, or Metaspace's leading "▁"
  bool byte_fallback_ = false;     ///< unknown symbols become <0xXX> tokens
  bool ignore_merges_ = false;     ///< a piece that is a whole token is not merged (Llama-3)
  bool use_scores_ = false;        ///< merge by token score (GGUF llama model), else merge rank
  std::string pre_name_;
  std::int32_t unk_id_ = -1;
  std::unordered_map<std::string, std::int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<float> scores_;
  std::unordered_map<std::string, std::int32_t> merge_rank_;  ///< "left\0right" -> rank
  std::vector<added_token> added_;                            ///< longest content first
  std::vector<bool> special_, is_added_;
  std::vector<std::int32_t> prefix_ids_, suffix_ids_;  ///< post-processor tokens of add_special
};

/// Chat prompt formats that prism-llm can apply.
enum class chat_format { chatml, llama2, llama3 };
/// The format a checkpoint's Jinja chat template is written for (ChatML: <|im_start|>; Llama-3:
/// <|start_header_id|>; Llama-2: [INST]). Without a template, the vocabulary's special tokens
/// decide. Throws prism::error(unsupported) naming the formats it knows.
chat_format detect_chat_format(const std::string& chat_template, const tokenizer& tok);
/// One user message (and an optional system message) in `format`, ready for the assistant's
/// reply. The text holds the format's special tokens, which encode() matches.
std::string apply_chat_format(chat_format format, const std::string& system, const std::string& user);

}  // namespace prism::llm
