// SPDX-License-Identifier: Apache-2.0
// Weight init, load and save for the decoder; names follow Hugging Face LlamaForCausalLM.
#include "examples/llm/weights.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "prism/error.hpp"
#include "prism/io/safetensors.hpp"

namespace prism::llm {

namespace {

// splitmix64: tiny, fast and identical on every platform, so a seed names the same weights
// in prism-llm, the tests and the PyTorch reference (which reads the saved file).
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t name_hash(const std::string& s) {  // FNV-1a
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

float round_to(float v, dtype t) {
  switch (t) {
    case dtype::f16:
      return half_to_float(float_to_half(v));
    case dtype::bf16:
      return bf16_to_float(float_to_bf16(v));
    default:
      return v;
  }
}

// Fills values with uniform(center - half_width, center + half_width), in parallel chunks whose
// streams depend only on (seed, name, chunk).
void fill_uniform(std::vector<float>& values, std::uint64_t seed, const std::string& name, double center,
                  double half_width, dtype t) {
  constexpr std::size_t chunk = 1 << 16;
  const std::size_t chunks = (values.size() + chunk - 1) / chunk;
  auto work = [&](std::size_t first, std::size_t step) {
    for (std::size_t c = first; c < chunks; c += step) {
      std::uint64_t state = seed ^ name_hash(name) ^ (c * 0xD1B54A32D192ED03ull);
      const std::size_t end = std::min(values.size(), (c + 1) * chunk);
      for (std::size_t i = c * chunk; i < end; ++i) {
        const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
        values[i] = round_to(static_cast<float>(center + half_width * (2.0 * u - 1.0)), t);
      }
    }
  };
  const std::size_t threads = chunks > 8 ? std::max(1u, std::thread::hardware_concurrency()) : 1;
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < threads; ++i) pool.emplace_back(work, i, threads);
  work(0, threads);
  for (auto& th : pool) th.join();
}

}  // namespace

std::string model_weights::layer_name(std::int64_t layer, const std::string& suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

std::string model_weights::lm_head_name() const {
  return config_.tie_embeddings || !tensors_.count("lm_head.weight") ? "model.embed_tokens.weight"
                                                                     : "lm_head.weight";
}

std::vector<std::pair<std::string, std::vector<std::int64_t>>> model_weights::expected(
    const model_config& c) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> out;
  const std::int64_t h = c.hidden_size;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
  for (std::int64_t l = 0; l < c.num_layers; ++l) {
    out.push_back({layer_name(l, "input_layernorm.weight"), {h}});
    out.push_back({layer_name(l, "self_attn.q_proj.weight"), {c.q_size(), h}});
    out.push_back({layer_name(l, "self_attn.k_proj.weight"), {c.kv_size(), h}});
    out.push_back({layer_name(l, "self_attn.v_proj.weight"), {c.kv_size(), h}});
    if (c.attention_bias) {
      out.push_back({layer_name(l, "self_attn.q_proj.bias"), {c.q_size()}});
      out.push_back({layer_name(l, "self_attn.k_proj.bias"), {c.kv_size()}});
      out.push_back({layer_name(l, "self_attn.v_proj.bias"), {c.kv_size()}});
    }
    if (c.qk_norm) {
      out.push_back({layer_name(l, "self_attn.q_norm.weight"), {c.head_dim}});
      out.push_back({layer_name(l, "self_attn.k_norm.weight"), {c.head_dim}});
    }
    out.push_back({layer_name(l, "self_attn.o_proj.weight"), {h, c.q_size()}});
    out.push_back({layer_name(l, "post_attention_layernorm.weight"), {h}});
    out.push_back({layer_name(l, "mlp.gate_proj.weight"), {c.intermediate_size, h}});
    out.push_back({layer_name(l, "mlp.up_proj.weight"), {c.intermediate_size, h}});
    out.push_back({layer_name(l, "mlp.down_proj.weight"), {h, c.intermediate_size}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  return out;
}

model_weights model_weights::random(const model_config& config, std::uint64_t seed) {
  config.validate();
  model_weights w;
  w.config_ = config;
  const double residual_scale = 1.0 / std::sqrt(2.0 * static_cast<double>(config.num_layers));
  for (const auto& [name, shape] : expected(config)) {
    host_tensor t;
    t.shape = shape;
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    t.values.resize(static_cast<std::size_t>(n));
    const bool is_norm = name.find("norm.weight") != std::string::npos;
    const bool is_bias = name.ends_with(".bias");
    double center = 0.0, half_width;
    if (is_norm) {
      center = 1.0;  // norms near 1 but not exactly, so a dropped norm weight changes the result
      half_width = 0.2;
    } else if (is_bias) {
      half_width = 0.1;
    } else if (name == "model.embed_tokens.weight") {
      half_width = std::sqrt(3.0);  // unit variance: the residual stream starts O(1)
    } else if (name == "lm_head.weight") {
      half_width = 3.0 * std::sqrt(3.0 / static_cast<double>(shape[1]));  // logits with std ~3
    } else {
      half_width = std::sqrt(3.0 / static_cast<double>(shape[1]));  // variance 1/fan_in
      if (name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight")) half_width *= residual_scale;
    }
    fill_uniform(t.values, seed, name, center, half_width, config.weight_dtype);
    w.tensors_.emplace(name, std::move(t));
  }
  return w;
}

namespace {

[[noreturn]] void throw_problems(const std::vector<std::string>& problems, const std::string& path,
                                 const model_config& config) {
  std::string text;
  const std::size_t shown = std::min<std::size_t>(problems.size(), 8);
  for (std::size_t i = 0; i < shown; ++i) text += "\n  " + problems[i];
  if (problems.size() > shown) text += fmt::format("\n  ... and {} more", problems.size() - shown);
  throw error(errc::invalid_argument, "llm::model_weights::load",
              fmt::format("'{}' does not match model '{}' ({}): {} problem(s):{}", path, config.name,
                          config.summary(), problems.size(), text));
}

// The GGUF name of a Hugging Face Llama tensor name (llama.cpp's tensor map).
std::string gguf_name(const std::string& hf) {
  static const std::pair<const char*, const char*> layer_map[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  const auto dot = hf.find('.', prefix.size());
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : layer_map)
    if (rest == from) return "blk." + layer + "." + to;
  return hf;
}

// Undoes llama.cpp's LlamaModel.permute: within each head, GGUF row i*2 + half holds Hugging
// Face row half*(D/2) + i (rotary pairs interleaved for its non-NeoX RoPE). Rows of `row` items.
template <class T>
void unpermute(std::vector<T>& v, std::int64_t rows, std::int64_t heads) {
  const auto row = static_cast<std::int64_t>(v.size()) / std::max<std::int64_t>(rows, 1);
  const std::int64_t d = rows / heads, half = d / 2;
  std::vector<T> out(v.size());
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < half; ++i)
      for (std::int64_t part = 0; part < 2; ++part) {
        const std::int64_t from = h * d + i * 2 + part, to = h * d + part * half + i;
        std::copy_n(v.begin() + from * row, row, out.begin() + to * row);
      }
  v = std::move(out);
}

void unpermute_rows(host_tensor& t, std::int64_t heads) {
  unpermute(t.values, t.shape[0], heads);
  if (t.quantized()) unpermute(t.blocks, t.shape[0], heads);  // whole rows of blocks
}

// `values` as blocks of `type`; values become the dequantized ones.
void quantize_tensor(host_tensor& t, dtype type, const std::string& name) {
  const std::int64_t cols = t.shape.empty() ? 0 : t.shape.back();
  if (cols % 32 != 0)
    throw error(errc::invalid_argument, "llm::model_weights::quantize",
                fmt::format("'{}' has rows of {} elements; {} needs whole blocks of 32", name, cols,
                            dtype_name(type)));
  const std::size_t n = t.values.size();
  t.block_type = type;
  t.blocks.resize(dtype_storage_bytes(type, static_cast<std::int64_t>(n)));
  double back[32];
  for (std::size_t b = 0; b < n / 32; ++b) {
    auto* block = reinterpret_cast<unsigned char*>(t.blocks.data()) + b * dtype_size(type);
    quantize_block(type, t.values.data() + b * 32, block);
    dequantize_block(type, block, back);
    for (int j = 0; j < 32; ++j) t.values[b * 32 + j] = static_cast<float>(back[j]);
  }
}

}  // namespace

namespace {

// The expected tensors a safetensors checkpoint holds, checked for presence, shape and dtype
// (every problem named at once); `config` comes back with tie_embeddings set when the file has
// no lm_head.weight.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> checked_tensors(
    model_config& config, const io::safetensors_checkpoint& file, const std::string& path) {
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> found;
  std::vector<std::string> problems;
  for (const auto& [name, shape] : model_weights::expected(config)) {
    if (!file.contains(name)) {
      if (name == "lm_head.weight") {
        config.tie_embeddings = true;  // checkpoints with tied embeddings omit lm_head
        continue;
      }
      problems.push_back(fmt::format("missing '{}' (expected shape {})", name, fmt::join(shape, "x")));
      continue;
    }
    const auto& view = file.get(name);
    if (view.shape != shape) {
      problems.push_back(fmt::format("'{}' has shape {}, the config needs {}", name,
                                     fmt::join(view.shape, "x"), fmt::join(shape, "x")));
      continue;
    }
    if (view.dtype != "F32" && view.dtype != "F16" && view.dtype != "BF16") {
      problems.push_back(fmt::format("'{}' has dtype {}; supported: F32, F16, BF16", name, view.dtype));
      continue;
    }
    found.push_back({name, shape});
  }
  if (!problems.empty()) throw_problems(problems, path, config);
  return found;
}

}  // namespace

model_weights model_weights::load(const model_config& config, const std::string& path) {
  config.validate();
  io::safetensors_checkpoint file(path);
  model_weights w;
  w.config_ = config;
  for (const auto& [name, shape] : checked_tensors(w.config_, file, path)) {
    host_tensor t;
    t.shape = shape;
    t.values = file.get(name).to_floats();
    if (config.weight_dtype != dtype::f32)
      for (auto& v : t.values) v = round_to(v, config.weight_dtype);
    w.tensors_.emplace(name, std::move(t));
  }
  return w;
}

device_weights load_device_weights(const queue& q, const model_config& config, const std::string& path,
                                   io::cpu_placement place) {
  config.validate();
  io::safetensors_checkpoint file(path);
  device_weights w;
  w.config = config;
  std::vector<std::string> names;
  for (const auto& [name, shape] : checked_tensors(w.config, file, path)) names.push_back(name);
  w.tensors = file.load_named(q, names, config.weight_dtype, place);
  for (const auto& shard : file.shards()) w.file_bytes += std::filesystem::file_size(shard.path());
  return w;
}

model_weights model_weights::load_gguf(const model_config& config, const io::gguf_file& file,
                                       bool keep_quantized) {
  config.validate();
  model_weights w;
  w.config_ = config;
  const bool permuted = config.architecture == "llama" || config.architecture == "mistral";
  std::vector<std::string> problems;
  for (const auto& [name, shape] : expected(config)) {
    const std::string gname = gguf_name(name);
    if (!file.contains(gname)) {
      if (name == "lm_head.weight") {
        w.config_.tie_embeddings = true;
        continue;
      }
      problems.push_back(
          fmt::format("missing '{}' (for {}, expected shape {})", gname, name, fmt::join(shape, "x")));
      continue;
    }
    const auto& info = file.get(gname);
    if (info.shape != shape) {
      problems.push_back(fmt::format("'{}' has shape {}, the config needs {}", gname,
                                     fmt::join(info.shape, "x"), fmt::join(shape, "x")));
      continue;
    }
    if (!io::gguf_type_dequantizable(info.type)) {
      problems.push_back(fmt::format("'{}' is {}; supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1", gname,
                                     io::gguf_type_name(info.type)));
      continue;
    }
    host_tensor t;
    t.shape = shape;
    t.values = file.dequantize(gname);
    const auto kept = io::gguf_prism_dtype(info.type);
    const bool head =
        name == "lm_head.weight" || (name == "model.embed_tokens.weight" && !file.contains("output.weight"));
    if (keep_quantized && kept && is_quantized(*kept) && (is_linear_weight(name) || head)) {
      t.block_type = *kept;
      t.blocks.assign(info.data.begin(), info.data.begin() + dtype_storage_bytes(*kept, info.numel()));
    }
    if (permuted && (name.ends_with("q_proj.weight") || name.ends_with("q_proj.bias")))
      unpermute_rows(t, config.num_heads);
    if (permuted && (name.ends_with("k_proj.weight") || name.ends_with("k_proj.bias")))
      unpermute_rows(t, config.num_kv_heads);
    if (config.weight_dtype != dtype::f32 && !t.quantized())
      for (auto& v : t.values) v = round_to(v, config.weight_dtype);
    if (name == "model.embed_tokens.weight" && t.quantized()) {
      // The tied head reads the blocks; the lookup table is the float values.
      w.head_ = t;
      t.block_type = dtype::f32;
      t.blocks.clear();
      if (config.weight_dtype != dtype::f32)
        for (auto& v : t.values) v = round_to(v, config.weight_dtype);
    }
    w.tensors_.emplace(name, std::move(t));
  }
  if (!problems.empty()) throw_problems(problems, file.path(), config);
  return w;
}

bool is_linear_weight(const std::string& hf_name) {
  static const char* const suffixes[] = {"q_proj.weight",   "k_proj.weight",    "v_proj.weight",
                                         "o_proj.weight",   "gate_proj.weight", "up_proj.weight",
                                         "down_proj.weight"};
  for (const char* s : suffixes)
    if (hf_name.starts_with("model.layers.") && hf_name.ends_with(s)) return true;
  return false;
}

void model_weights::quantize(dtype type) {
  if (type != dtype::q8_0 && type != dtype::q4_0)
    throw error(errc::invalid_argument, "llm::model_weights::quantize",
                fmt::format("cannot quantize to {}; valid: q8_0, q4_0", dtype_name(type)));
  for (auto& [name, t] : tensors_)
    if (is_linear_weight(name)) quantize_tensor(t, type, name);
  if (auto it = tensors_.find("lm_head.weight"); it != tensors_.end() && !config_.tie_embeddings) {
    quantize_tensor(it->second, dtype::q8_0, "lm_head.weight");
  } else {
    head_ = get("model.embed_tokens.weight");
    quantize_tensor(head_, dtype::q8_0, "model.embed_tokens.weight (the tied output head)");
  }
}

void model_weights::save(const std::string& path, dtype type) const {
  std::vector<io::safetensor_data> list;
  for (const auto& [name, shape] : expected(config_)) {
    if (name == "lm_head.weight" && !tensors_.count(name)) continue;
    const auto& t = get(name);
    list.push_back({name, t.shape, t.values});
  }
  io::write_safetensors(path, list, type, config_metadata(config_));
}

const host_tensor& model_weights::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw error(errc::not_found, "llm::model_weights", fmt::format("no weight named '{}'", name));
  return it->second;
}

std::map<std::string, std::string> config_metadata(const model_config& c) {
  return {{"format", "pt"},
          {"prism.model", c.name},
          {"hidden_size", std::to_string(c.hidden_size)},
          {"num_hidden_layers", std::to_string(c.num_layers)},
          {"num_attention_heads", std::to_string(c.num_heads)},
          {"num_key_value_heads", std::to_string(c.num_kv_heads)},
          {"head_dim", std::to_string(c.head_dim)},
          {"intermediate_size", std::to_string(c.intermediate_size)},
          {"vocab_size", std::to_string(c.vocab_size)},
          {"rope_theta", fmt::format("{}", c.rope_theta)},
          {"rms_norm_eps", fmt::format("{}", c.rms_eps)},
          {"max_position_embeddings", std::to_string(c.max_seq_len)},
          {"tie_word_embeddings", c.tie_embeddings ? "true" : "false"},
          {"attention_bias", c.attention_bias ? "true" : "false"},
          {"qk_norm", c.qk_norm ? "true" : "false"},
          {"dtype", dtype_name(c.weight_dtype)}};
}

}  // namespace prism::llm
