// SPDX-License-Identifier: Apache-2.0
// config.json and GGUF metadata to model_config; opening a model folder or a GGUF file.
#include "examples/llm/checkpoint.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "examples/llm/unicode.hpp"
#include "prism/error.hpp"

namespace prism::llm {

namespace {

using json = nlohmann::json;
constexpr const char* known_architectures =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM (model_type llama, mistral, "
    "qwen2, "
    "qwen3)";

[[noreturn]] void field_error(const std::string& source, const std::string& what) {
  throw error(errc::config_error, "llm::config", fmt::format("'{}': {}", source, what));
}

std::int64_t get_int(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || j[key].is_null())
    field_error(source, fmt::format("the field \"{}\" is missing", key));
  if (!j[key].is_number_integer())
    field_error(source, fmt::format("\"{}\" must be an integer, got {}", key, j[key].dump()));
  return j[key].get<std::int64_t>();
}

std::int64_t get_int_or(const json& j, const char* key, std::int64_t fallback, const std::string& source) {
  return j.contains(key) && !j[key].is_null() ? get_int(j, key, source) : fallback;
}

double get_number_or(const json& j, const char* key, double fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number())
    field_error(source, fmt::format("\"{}\" must be a number, got {}", key, j[key].dump()));
  return j[key].get<double>();
}

bool get_bool_or(const json& j, const char* key, bool fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_boolean())
    field_error(source, fmt::format("\"{}\" must be true or false, got {}", key, j[key].dump()));
  return j[key].get<bool>();
}

std::vector<std::int64_t> token_ids(const json& j, const char* key, const std::string& source) {
  std::vector<std::int64_t> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  if (j[key].is_number_integer()) return {j[key].get<std::int64_t>()};
  if (!j[key].is_array())
    field_error(source, fmt::format("\"{}\" must be a token id or a list of them", key));
  for (const auto& v : j[key]) {
    if (!v.is_number_integer()) field_error(source, fmt::format("\"{}\" must hold token ids", key));
    out.push_back(v.get<std::int64_t>());
  }
  return out;
}

// rope_scaling (transformers 4) or rope_parameters (transformers 5): {rope_type|type, factor, ...}.
void read_rope(const json& j, model_config& c, const std::string& source) {
  c.rope_theta = get_number_or(j, "rope_theta", 10000.0, source);
  const json* scaling = nullptr;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) scaling = &j["rope_parameters"];
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) scaling = &j["rope_scaling"];
  if (!scaling) return;
  const json& s = *scaling;
  c.rope_theta = get_number_or(s, "rope_theta", c.rope_theta, source);
  std::string type = s.value("rope_type", s.value("type", std::string("default")));
  if (type == "default") return;
  if (type == "linear") {
    c.rope_scaling = model_config::rope_scaling_kind::linear;
  } else if (type == "llama3") {
    c.rope_scaling = model_config::rope_scaling_kind::llama3;
    c.rope_low_freq_factor = get_number_or(s, "low_freq_factor", 1.0, source);
    c.rope_high_freq_factor = get_number_or(s, "high_freq_factor", 4.0, source);
    c.rope_original_max_positions = get_number_or(s, "original_max_position_embeddings", 8192, source);
  } else {
    throw error(errc::unsupported, "llm::config",
                fmt::format("'{}': rope scaling '{}' is not supported; valid: default, linear, llama3",
                            source, type));
  }
  if (!s.contains("factor")) field_error(source, fmt::format("rope scaling '{}' needs \"factor\"", type));
  c.rope_factor = get_number_or(s, "factor", 1.0, source);
}

}  // namespace

model_config config_from_hf_json(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    field_error(source, fmt::format("not valid JSON: {}", e.what()));
  }
  if (!j.is_object()) field_error(source, "a config.json must be a JSON object");
  std::string arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    arch = j["architectures"][0].get<std::string>();
  const std::string model_type = j.value("model_type", std::string());
  model_config c;
  if (arch == "LlamaForCausalLM" || (arch.empty() && model_type == "llama"))
    c.architecture = "llama";
  else if (arch == "MistralForCausalLM" || (arch.empty() && model_type == "mistral"))
    c.architecture = "mistral";
  else if (arch == "Qwen2ForCausalLM" || (arch.empty() && model_type == "qwen2"))
    c.architecture = "qwen2";
  else if (arch == "Qwen3ForCausalLM" || (arch.empty() && model_type == "qwen3"))
    c.architecture = "qwen3";
  else
    throw error(errc::unsupported, "llm::config",
                fmt::format("'{}': architecture '{}' (model_type '{}') is not supported; valid: {}", source,
                            arch.empty() ? "<none>" : arch, model_type, known_architectures));
  c.name = j.value("_name_or_path", std::string());
  if (c.name.empty()) c.name = c.architecture;
  c.hidden_size = get_int(j, "hidden_size", source);
  c.num_layers = get_int(j, "num_hidden_layers", source);
  c.num_heads = get_int(j, "num_attention_heads", source);
  c.intermediate_size = get_int(j, "intermediate_size", source);
  c.vocab_size = get_int(j, "vocab_size", source);
  c.num_kv_heads = get_int_or(j, "num_key_value_heads", c.num_heads, source);
  if (c.num_heads <= 0) field_error(source, "\"num_attention_heads\" must be positive");
  c.head_dim = get_int_or(j, "head_dim", c.hidden_size / c.num_heads, source);
  c.rms_eps = get_number_or(j, "rms_norm_eps", 1e-6, source);
  c.max_position_embeddings = get_int(j, "max_position_embeddings", source);
  c.max_seq_len = c.max_position_embeddings;
  c.tie_embeddings = get_bool_or(j, "tie_word_embeddings", false, source);
  // Qwen2's q/k/v always carry a bias; Llama, Mistral and Qwen3 say so in attention_bias.
  c.attention_bias = c.architecture == "qwen2" ? true : get_bool_or(j, "attention_bias", false, source);
  c.qk_norm = c.architecture == "qwen3";
  if (get_bool_or(j, "mlp_bias", false, source))
    throw error(errc::unsupported, "llm::config",
                fmt::format("'{}': \"mlp_bias\": true is not supported", source));
  read_rope(j, c, source);
  if (get_bool_or(j, "use_sliding_window", true, source))
    c.sliding_window = get_int_or(j, "sliding_window", 0, source);
  const auto bos = token_ids(j, "bos_token_id", source);
  if (!bos.empty()) c.bos_token_id = bos[0];
  c.eos_token_ids = token_ids(j, "eos_token_id", source);
  return c;
}

model_config config_from_gguf(const io::gguf_file& f) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
    throw error(errc::unsupported, "llm::config",
                fmt::format("'{}': general.architecture '{}' is not supported; valid: llama, qwen2, qwen3",
                            f.path(), arch));
  auto key = [&](const char* k) { return arch + "." + k; };
  model_config c;
  c.architecture = arch;
  c.name = f.contains_key("general.name") ? f.get_string("general.name") : arch;
  c.hidden_size = f.get_int(key("embedding_length"));
  c.num_layers = f.get_int(key("block_count"));
  c.num_heads = f.get_int(key("attention.head_count"));
  c.num_kv_heads = f.contains_key(key("attention.head_count_kv")) ? f.get_int(key("attention.head_count_kv"))
                                                                  : c.num_heads;
  if (c.num_heads <= 0)
    throw error(errc::config_error, "llm::config",
                fmt::format("'{}': {} must be positive", f.path(), key("attention.head_count")));
  c.head_dim = f.contains_key(key("attention.key_length")) ? f.get_int(key("attention.key_length"))
                                                           : c.hidden_size / c.num_heads;
  c.intermediate_size = f.get_int(key("feed_forward_length"));
  c.max_position_embeddings = f.get_int(key("context_length"));
  c.max_seq_len = c.max_position_embeddings;
  c.rope_theta = f.contains_key(key("rope.freq_base")) ? f.get_float(key("rope.freq_base")) : 10000.0;
  c.rms_eps = f.get_float(key("attention.layer_norm_rms_epsilon"));
  const auto& embed = f.get("token_embd.weight");
  c.vocab_size = f.contains_key(key("vocab_size")) ? f.get_int(key("vocab_size")) : embed.shape[0];
  c.tie_embeddings = !f.contains("output.weight");
  c.attention_bias = f.contains("blk.0.attn_q.bias");
  c.qk_norm = f.contains("blk.0.attn_q_norm.weight");
  if (f.contains_key(key("rope.scaling.type"))) {
    const auto type = f.get_string(key("rope.scaling.type"));
    if (type == "linear") {
      c.rope_scaling = model_config::rope_scaling_kind::linear;
      c.rope_factor = f.get_float(key("rope.scaling.factor"));
    } else if (type != "none") {
      throw error(
          errc::unsupported, "llm::config",
          fmt::format("'{}': {} '{}' is not supported; valid: none, linear (llama3 scaling comes as the "
                      "rope_freqs.weight tensor)",
                      f.path(), key("rope.scaling.type"), type));
    }
  }
  if (f.contains("rope_freqs.weight"))
    for (float v : f.dequantize("rope_freqs.weight")) c.rope_freq_factors.push_back(v);
  if (f.contains_key("tokenizer.ggml.bos_token_id"))
    c.bos_token_id = f.get_int("tokenizer.ggml.bos_token_id");
  if (f.contains_key("tokenizer.ggml.eos_token_id"))
    c.eos_token_ids.push_back(f.get_int("tokenizer.ggml.eos_token_id"));
  if (f.contains_key("tokenizer.ggml.eot_token_id"))
    c.eos_token_ids.push_back(f.get_int("tokenizer.ggml.eot_token_id"));
  return c;
}

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(errc::io_error, "llm::open_checkpoint", fmt::format("cannot read '{}'", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

checkpoint open_checkpoint(const std::string& path, dtype type, std::int64_t max_context, bool keep_quantized,
                           const queue* device, io::cpu_placement place) {
  namespace fs = std::filesystem;
  if (!fs::exists(path))
    throw error(
        errc::not_found, "prism-llm --model",
        fmt::format("'{}' does not exist; expected a Hugging Face model folder or a .gguf file", path));
  checkpoint ck;
  if (fs::is_directory(path)) {
    const auto config_path = (fs::path(path) / "config.json").string();
    if (!fs::exists(config_path))
      throw error(errc::not_found, "prism-llm --model",
                  fmt::format("'{}' has no config.json; a Hugging Face model folder holds config.json and "
                              "model.safetensors (or an index and shards)",
                              path));
    ck.config = config_from_hf_json(read_text(config_path), config_path);
    ck.config.weight_dtype = type;
    ck.config.max_seq_len = std::min(ck.config.max_position_embeddings, max_context);
    if (ck.config.sliding_window > 0)
      ck.config.max_seq_len = std::min(ck.config.max_seq_len, ck.config.sliding_window);
    if (device) {
      ck.device = load_device_weights(*device, ck.config, path, place);
      ck.config = ck.device->config;
    } else {
      ck.weights = model_weights::load(ck.config, path);
    }
    const auto tok_path = (fs::path(path) / "tokenizer.json").string();
    if (fs::exists(tok_path))
      ck.tok = std::make_shared<const tokenizer>(tokenizer::from_json(read_text(tok_path), tok_path));
    const auto tc_path = (fs::path(path) / "tokenizer_config.json").string();
    if (fs::exists(tc_path)) {
      const auto tc = nlohmann::json::parse(read_text(tc_path), nullptr, false);
      if (tc.is_object() && tc.contains("chat_template") && tc["chat_template"].is_string())
        ck.chat_template = tc["chat_template"].get<std::string>();
    }
    const auto jinja = (fs::path(path) / "chat_template.jinja").string();
    if (ck.chat_template.empty() && fs::exists(jinja)) ck.chat_template = read_text(jinja);
  } else {
    io::gguf_file file(path);
    ck.config = config_from_gguf(file);
    ck.config.weight_dtype = type;
    ck.config.max_seq_len = std::min(ck.config.max_position_embeddings, max_context);
    ck.weights = model_weights::load_gguf(ck.config, file, keep_quantized);
    if (file.contains_key("tokenizer.ggml.model"))
      ck.tok = std::make_shared<const tokenizer>(tokenizer::from_gguf(file));
    if (file.contains_key("tokenizer.chat_template"))
      ck.chat_template = file.get_string("tokenizer.chat_template");
  }
  if (!ck.device) ck.config = ck.weights.config();
  return ck;
}

void save_hf_checkpoint(const model_weights& weights, const std::string& dir) {
  namespace fs = std::filesystem;
  const model_config& c = weights.config();
  if (c.vocab_size < 259)
    throw error(errc::invalid_argument, "prism-llm --save-model",
                fmt::format("model '{}' has vocab_size {}; a byte-level tokenizer needs >= 259", c.name,
                            c.vocab_size));
  fs::create_directories(dir);
  const char* arch = c.qk_norm          ? "Qwen3ForCausalLM"
                     : c.attention_bias ? "Qwen2ForCausalLM"
                                        : "LlamaForCausalLM";
  const std::int64_t eos = c.vocab_size - 3;  // <|endoftext|>
  json config = {{"architectures", {arch}},
                 {"model_type", c.qk_norm          ? "qwen3"
                                : c.attention_bias ? "qwen2"
                                                   : "llama"},
                 {"hidden_size", c.hidden_size},
                 {"num_hidden_layers", c.num_layers},
                 {"num_attention_heads", c.num_heads},
                 {"num_key_value_heads", c.num_kv_heads},
                 {"head_dim", c.head_dim},
                 {"intermediate_size", c.intermediate_size},
                 {"vocab_size", c.vocab_size},
                 {"max_position_embeddings", c.max_seq_len},
                 {"rms_norm_eps", c.rms_eps},
                 {"rope_theta", c.rope_theta},
                 {"tie_word_embeddings", c.tie_embeddings},
                 {"attention_bias", c.attention_bias},
                 {"hidden_act", "silu"},
                 {"bos_token_id", eos},
                 {"eos_token_id", eos},
                 {"torch_dtype", "float32"}};
  std::ofstream(fs::path(dir) / "config.json") << config.dump(2) << "\n";
  weights.save((fs::path(dir) / "model.safetensors").string(), dtype::f32);
  // The GPT-2 byte map: printable bytes stand for themselves, the others for 256 + n.
  json vocab = json::object();
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    std::string text;
    unicode::append_utf8(text, printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++));
    vocab[text] = b;
  }
  // Ids 256 .. vocab - 4 are merges of letters, space and '.' (pairs, then pair + letter), so a
  // random model's output is visible text; the last three ids are the special tokens.
  const std::vector<std::string> letters = [] {
    std::vector<std::string> v;
    for (char ch = 'a'; ch <= 'z'; ++ch) v.emplace_back(1, ch);
    v.push_back("\xC4\xA0");  // 'Ġ': the byte-level space
    v.push_back(".");
    return v;
  }();
  json merges = json::array();
  std::vector<std::string> pairs;
  const std::int64_t first_special = c.vocab_size - 3;
  std::int64_t id = 256;
  for (std::size_t i = 0; i < letters.size() && id < first_special; ++i)
    for (std::size_t j = 0; j < letters.size() && id < first_special; ++j, ++id) {
      merges.push_back(letters[i] + " " + letters[j]);
      pairs.push_back(letters[i] + letters[j]);
      vocab[pairs.back()] = id;
    }
  for (std::size_t p = 0; p < pairs.size() && id < first_special; ++p)
    for (std::size_t k = 0; k < letters.size() && id < first_special; ++k, ++id) {
      merges.push_back(pairs[p] + " " + letters[k]);
      vocab[pairs[p] + letters[k]] = id;
    }
  for (; id < first_special; ++id) vocab[fmt::format("<|reserved_{}|>", id)] = id;
  json added = json::array();
  const char* specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  for (std::int64_t k = 0; k < 3; ++k)
    added.push_back({{"id", first_special + k},
                     {"content", specials[k]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  json tok = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}}};
  std::ofstream(fs::path(dir) / "tokenizer.json") << tok.dump() << "\n";
  const json tc = {
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"eos_token", "<|endoftext|>"},
      {"chat_template",
       "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
       "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}};
  std::ofstream out(fs::path(dir) / "tokenizer_config.json");
  out << tc.dump(2) << "\n";
  if (!out) throw error(errc::io_error, "prism-llm --save-model", fmt::format("cannot write into '{}'", dir));
}

}  // namespace prism::llm
