// SPDX-License-Identifier: Apache-2.0
// The prism decoder's forward pass, one prism::ops call per step (see decoder.hpp).
#include "examples/llm/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "prism/dispatch.hpp"
#include "prism/error.hpp"

namespace prism::llm {

namespace {
std::uint64_t dispatched_op_ns() {
  std::uint64_t ns = 0;
  for (const auto& s : dispatch::statistics()) ns += s.time_ns;
  return ns;
}
}  // namespace

void step_timer::start(queue& q) {
  q.wait();
  t0_ = std::chrono::steady_clock::now();
  op_ns0_ = dispatched_op_ns();
}

void step_timer::stop(queue& q, const char* step) {
  q.wait();
  const auto now = std::chrono::steady_clock::now();
  const std::uint64_t op_ns = dispatched_op_ns();
  auto& e = entries_[step];
  e.seconds += std::chrono::duration<double>(now - t0_).count();
  e.op_seconds += static_cast<double>(op_ns - op_ns0_) * 1e-9;
  e.calls += 1;
  t0_ = now;
  op_ns0_ = op_ns;
}

double step_timer::total_seconds() const {
  double s = 0;
  for (const auto& [name, e] : entries_) s += e.seconds;
  return s;
}

namespace {

// The host path's weights in one storage, each a view: one allocation instead of one per tensor,
// so that on CPU devices a model of 32 MiB and more lies on 2 MiB pages (PRISM_HUGE_PAGES,
// docs/runtime.md), which decode streams faster. Anything past the device's largest allocation
// gets a buffer of its own.
class weight_arena {
 public:
  // Views start on 256 bytes and, for block types, on a whole pair of blocks (64 elements: the
  // quantized rows kernel's block-pair variant reads from such offsets).
  static std::size_t alignment(dtype type) {
    constexpr std::size_t bytes = 256;
    return is_quantized(type) ? std::lcm(bytes, 2 * dtype_size(type)) : bytes;
  }
  /// Room for `bytes` of `type` whatever the offset before it.
  static std::size_t room(std::size_t bytes, dtype type) { return bytes + alignment(type); }

  weight_arena(queue& q, std::size_t bytes) : q_(q) {
    if (bytes > 0 && bytes <= q.get_device().max_mem_alloc_size()) {
      storage_ = tensor::empty(q, dims{static_cast<std::int64_t>(bytes)}, dtype::boolean).storage();
      capacity_ = bytes;
    }
  }
  tensor put(const void* data, const dims& shape, dtype type) {
    const std::size_t bytes = dtype_storage_bytes(type, shape.product());
    const std::size_t a = alignment(type), at = (used_ + a - 1) / a * a;
    if (bytes == 0 || at + bytes > capacity_) return tensor::from_host(q_, data, shape, type);
    // Element offset: whole blocks for block types (dtype_size is a block's bytes).
    const auto offset = static_cast<std::int64_t>(at / dtype_size(type) * dtype_block_elements(type));
    tensor out(storage_, shape, contiguous_strides(shape), offset, type);
    storage_.write(std::span<const std::byte>(static_cast<const std::byte*>(data), bytes), at);
    used_ = at + bytes;
    return out;
  }

 private:
  queue& q_;
  buffer<std::byte> storage_;
  std::size_t capacity_ = 0, used_ = 0;
};

// Host f32 values to a device tensor of `type` without tensor::from_floats' double-precision
// staging: f32 goes up as is, f16/bf16 as their bits (the values are already rounded to them).
tensor upload_values(weight_arena& arena, std::span<const float> values, const dims& shape, dtype type) {
  if (type == dtype::f32) return arena.put(values.data(), shape, type);
  std::vector<std::uint16_t> bits(values.size());
  convert_floats(dtype::f32, values.data(), type, bits.data(), values.size());
  return arena.put(bits.data(), shape, type);
}

// A block-quantized weight goes up as its blocks; others as `type`.
tensor upload(weight_arena& arena, const host_tensor& t, dtype type) {
  const dims shape(std::span<const std::int64_t>(t.shape));
  if (t.quantized()) return arena.put(t.blocks.data(), shape, t.block_type);
  return upload_values(arena, t.values, shape, type);
}

// Row-wise concatenation of [rows_i, cols] matrices (or 1-D vectors) into one device tensor;
// parts all quantized alike concatenate their blocks (whole rows), a mix goes up as `type`.
tensor upload_cat(weight_arena& arena, const std::vector<const host_tensor*>& parts, dtype type) {
  bool same_blocks = parts[0]->quantized();
  for (const auto* p : parts) same_blocks = same_blocks && p->block_type == parts[0]->block_type;
  if (same_blocks) {
    std::vector<std::byte> blocks;
    std::int64_t rows = 0;
    for (const auto* p : parts) {
      blocks.insert(blocks.end(), p->blocks.begin(), p->blocks.end());
      rows += p->shape[0];
    }
    return arena.put(blocks.data(), {rows, parts[0]->shape[1]}, parts[0]->block_type);
  }
  std::size_t total = 0;
  std::int64_t rows = 0;
  for (const auto* p : parts) {
    total += p->values.size();
    rows += p->shape[0];
  }
  std::vector<float> values;
  values.reserve(total);
  for (const auto* p : parts) values.insert(values.end(), p->values.begin(), p->values.end());
  dims shape = parts[0]->shape.size() == 2 ? dims{rows, parts[0]->shape[1]} : dims{rows};
  return upload_values(arena, values, shape, type);
}

// Row-wise concatenation of contiguous device tensors: a view when the parts lie back to back
// in one storage (a checkpoint that stores q, k, v or gate, up in this order, as
// save_hf_checkpoint does), else one buffer filled by a device copy per part (no kernel, so a
// load builds no program).
tensor fuse_rows(queue& q, const std::vector<const tensor*>& parts) {
  const tensor& first = *parts[0];
  bool adjacent = true, contiguous = true;
  std::int64_t rows = 0, next = first.offset();
  for (const tensor* p : parts) {
    contiguous = contiguous && p->is_contiguous() && p->type() == first.type() && p->dim() == first.dim() &&
                 (p->dim() == 1 || p->shape()[1] == first.shape()[1]);
    adjacent = adjacent && p->storage() == first.storage() && p->offset() == next;
    next = p->offset() + p->numel();
    rows += p->shape()[0];
  }
  const dims shape = first.dim() == 2 ? dims{rows, first.shape()[1]} : dims{rows};
  if (!contiguous) {
    std::vector<tensor> list;
    for (const tensor* p : parts) list.push_back(*p);
    return ops::cat(q, list, 0);
  }
  if (adjacent) {
    const dims strides = first.dim() == 2 ? dims{first.shape()[1], 1} : dims{1};
    return tensor(first.storage(), shape, strides, first.offset(), first.type());
  }
  tensor out = tensor::empty(q, shape, first.type());
  const std::size_t elem = dtype_size(first.type());
  std::size_t at = 0;
  for (const tensor* p : parts) {
    buffer<std::byte> src = p->storage();
    q.submit([&](handler& h) {
      accessor<std::byte> from(src, h, read_only);
      accessor<std::byte> to(out.storage(), h, write_only);
      h.copy(from, to, p->nbytes(), static_cast<std::size_t>(p->offset()) * elem, at);
    });
    at += p->nbytes();
  }
  return out;
}

// A zeroed tensor by a buffer fill (no kernel): every float dtype's zero is all-zero bytes.
tensor zeroed(queue& q, const dims& shape, dtype t) {
  tensor out = tensor::empty(q, shape, t);
  q.fill(out.storage(), std::byte{0});
  return out;
}

}  // namespace

decoder::decoder(queue& q, const device_weights& weights) : q_(q), c_(weights.config) {
  const auto t0 = std::chrono::steady_clock::now();
  c_.validate();
  const dtype t = c_.weight_dtype;
  auto get = [&](const std::string& name) -> const tensor& {
    auto it = weights.tensors.find(name);
    if (it == weights.tensors.end())
      throw error(errc::not_found, "llm::decoder", fmt::format("no device weight named '{}'", name));
    if (it->second.type() != t)
      throw error(errc::invalid_argument, "llm::decoder",
                  fmt::format("device weight '{}' is {}, the model's dtype is {}", name,
                              dtype_name(it->second.type()), dtype_name(t)));
    return it->second;
  };
  embed_ = get("model.embed_tokens.weight");
  final_norm_ = get("model.norm.weight");
  lm_head_ = c_.tie_embeddings || !weights.tensors.count("lm_head.weight") ? embed_ : get("lm_head.weight");
  build_layers([&](const std::string& name) { return get(name); },
               [&](const std::vector<std::string>& names) {
                 std::vector<const tensor*> parts;
                 for (const auto& n : names) parts.push_back(&get(n));
                 return fuse_rows(q_, parts);
               });
  finish_setup(t0);
}

decoder::decoder(queue& q, const model_weights& weights) : q_(q), c_(weights.config()) {
  const auto t0 = std::chrono::steady_clock::now();
  c_.validate();
  const dtype t = c_.weight_dtype;
  // The arena holds every weight once: a tied head is the embedding itself, unless the head
  // reads a block-quantized copy of it.
  auto room = [&](const host_tensor& w) {
    return w.quantized()
               ? weight_arena::room(w.blocks.size(), w.block_type)
               : weight_arena::room(dtype_storage_bytes(t, static_cast<std::int64_t>(w.values.size())), t);
  };
  std::size_t arena_bytes = 0;
  for (const auto& [name, shape] : model_weights::expected(c_))
    if (weights.contains(name)) arena_bytes += room(weights.get(name));
  if (&weights.head() != &weights.get(weights.lm_head_name())) arena_bytes += room(weights.head());
  weight_arena arena(q_, arena_bytes);
  embed_ = upload(arena, weights.get("model.embed_tokens.weight"), t);
  final_norm_ = upload(arena, weights.get("model.norm.weight"), t);
  lm_head_ = &weights.head() == &weights.get("model.embed_tokens.weight") ? embed_
                                                                          : upload(arena, weights.head(), t);
  build_layers([&](const std::string& name) { return upload(arena, weights.get(name), t); },
               [&](const std::vector<std::string>& names) {
                 std::vector<const host_tensor*> parts;
                 for (const auto& n : names) parts.push_back(&weights.get(n));
                 return upload_cat(arena, parts, t);
               });
  finish_setup(t0);
}

// Each layer's tensors by their Hugging Face names, whatever the source: `one` gives a tensor,
// `cat` the row-wise concatenation of several (the fused qkv and gate|up weights).
void decoder::build_layers(const std::function<tensor(const std::string&)>& one,
                           const std::function<tensor(const std::vector<std::string>&)>& cat) {
  for (std::int64_t l = 0; l < c_.num_layers; ++l) {
    auto name = [&](const char* s) { return model_weights::layer_name(l, s); };
    layer_weights L;
    L.input_norm = one(name("input_layernorm.weight"));
    L.qkv = cat(
        {name("self_attn.q_proj.weight"), name("self_attn.k_proj.weight"), name("self_attn.v_proj.weight")});
    if (c_.attention_bias)
      L.qkv_bias =
          cat({name("self_attn.q_proj.bias"), name("self_attn.k_proj.bias"), name("self_attn.v_proj.bias")});
    if (c_.qk_norm) {
      L.q_norm = one(name("self_attn.q_norm.weight"));
      L.k_norm = one(name("self_attn.k_norm.weight"));
    }
    L.o_proj = one(name("self_attn.o_proj.weight"));
    L.post_norm = one(name("post_attention_layernorm.weight"));
    L.gate_up = cat({name("mlp.gate_proj.weight"), name("mlp.up_proj.weight")});
    L.down = one(name("mlp.down_proj.weight"));
    layers_.push_back(std::move(L));
  }
}

// Waits for the weights, then builds the caches, timing each part (setup_).
void decoder::finish_setup(std::chrono::steady_clock::time_point t0) {
  norm_fusable_ = final_norm_.defined();
  for (const auto& L : layers_)
    for (const tensor* w : {&L.qkv, &L.o_proj, &L.gate_up, &L.down, &L.input_norm, &L.post_norm})
      norm_fusable_ = norm_fusable_ && w->defined();
  mlp_fusable_ = std::none_of(layers_.begin(), layers_.end(),
                              [](const layer_weights& L) { return is_quantized(L.gate_up.type()); }) ||
                 q_.get_device().is_cpu();
  // post_attention takes the three weights in one dtype: float, or one GGUF block format.
  block_fusable_ = norm_fusable_;
  for (const auto& L : layers_)
    block_fusable_ =
        block_fusable_ && L.o_proj.type() == L.gate_up.type() && L.o_proj.type() == L.down.type();
  q_.wait();
  setup_.weights_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  init_caches();
  setup_.caches_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - setup_.weights_seconds;
}

std::size_t decoder::weight_storages() const {
  std::vector<const tensor*> all = {&embed_, &final_norm_, &lm_head_};
  for (const auto& L : layers_)
    for (const tensor* w : {&L.input_norm, &L.qkv, &L.qkv_bias, &L.q_norm, &L.k_norm, &L.o_proj, &L.post_norm,
                            &L.gate_up, &L.down})
      all.push_back(w);
  std::vector<const tensor*> distinct;
  for (const tensor* w : all) {
    if (!w->storage()) continue;
    bool seen = false;
    for (const tensor* d : distinct) seen = seen || d->same_storage(*w);
    if (!seen) distinct.push_back(w);
  }
  return distinct.size();
}

void decoder::init_caches() {
  for (auto& L : layers_)
    L.kv_cache = zeroed(q_, {2, c_.num_kv_heads, c_.max_seq_len, c_.head_dim}, c_.weight_dtype);
  // RoPE table in double, stored f32: [max_seq, head_dim] = cos | sin of pos * inv_freq[i], i < d/2
  // (theta^(-2i/d), with the checkpoint's rope_scaling applied).
  const std::int64_t half = c_.head_dim / 2;
  const auto inv_freq = c_.rope_inv_freq();
  std::vector<float> table(static_cast<std::size_t>(c_.max_seq_len * c_.head_dim));
  for (std::int64_t p = 0; p < c_.max_seq_len; ++p)
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * inv_freq[i];
      table[p * c_.head_dim + i] = static_cast<float>(std::cos(angle));
      table[p * c_.head_dim + half + i] = static_cast<float>(std::sin(angle));
    }
  cos_sin_ = tensor::from_host(q_, table.data(), {c_.max_seq_len, c_.head_dim}, dtype::f32);
  std::vector<std::int64_t> positions(static_cast<std::size_t>(c_.max_seq_len));
  for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<std::int64_t>(i);
  positions_ = tensor::from_host(q_, positions.data(), {c_.max_seq_len}, dtype::i64);
  layer_out_.resize(c_.num_layers);
  q_.wait();
}

void decoder::step(const char* name) {
  if (timer_) timer_->stop(q_, name);
}

tensor decoder::forward(std::span<const std::int32_t> tokens) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  for (std::int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= c_.vocab_size)
      throw error(errc::invalid_argument, "llm::decoder::forward",
                  fmt::format("token {} at prompt index {} is outside the vocabulary [0, {})", tokens[i], i,
                              c_.vocab_size));
  // i64 ids, like argmax's output: prefill and decode share one embedding dtype key.
  const std::vector<std::int64_t> ids(tokens.begin(), tokens.end());
  return forward(tensor::from_host(q_, ids.data(), {n}, dtype::i64));
}

void decoder::check_room(std::int64_t n, const char* where) const {
  if (pos_ + n > c_.max_seq_len)
    throw error(errc::invalid_argument, where,
                fmt::format("position {} + {} {} exceeds max_seq_len {} of model '{}'", pos_, n,
                            n == 1 ? "token" : "tokens", c_.max_seq_len, c_.name));
}

tensor decoder::forward(const tensor& token_ids) {
  const std::int64_t n = token_ids.numel();
  if (token_ids.dim() != 1 || n == 0)
    throw error(errc::invalid_argument, "llm::decoder::forward",
                fmt::format("token ids must be a non-empty 1-D tensor, got {}", token_ids.str()));
  check_room(n, "llm::decoder::forward");
  tensor logits = forward_at(token_ids, positions_.slice(0, pos_, pos_ + n), pos_);
  pos_ += n;
  return logits;
}

tensor decoder::forward_at(const tensor& token_ids, const tensor& positions, std::int64_t pos) {
  const std::int64_t n = token_ids.numel();
  const std::int64_t qs = c_.q_size();
  const double eps = c_.rms_eps;
  if (timer_) timer_->start(q_);
  tensor x = ops::embedding(q_, embed_, token_ids);  // the residual stream, [n, hidden]
  step("embedding");
  if (n == 1 && fusions_.norm && norm_fusable_) return forward_fused_norms(x, positions);
  tensor h, mlp_out;
  for (std::int64_t l = 0; l < c_.num_layers; ++l) {
    auto& L = layers_[l];
    if (l == 0) {
      h = ops::rms_norm(q_, x, L.input_norm, eps);
      step("rms_norm");
    } else {
      // x += previous layer's MLP output, then this layer's input norm, in one kernel.
      h = ops::fused_add_rms_norm(q_, mlp_out, x, L.input_norm, eps);
      step("add_rms_norm");
      if (capture_) layer_out_[l - 1] = x.to_floats(q_);
    }
    const tensor qkv = ops::linear(q_, h, L.qkv, L.qkv_bias);  // [n, q + 2 kv]
    step("qkv_proj");
    tensor attn_rows;
    if (n == 1) {
      attn_rows = decode_attention_rows(L, qkv, positions);
    } else {
      // q/k norm, RoPE and the k/v append to the cache at `positions`, in one kernel.
      const tensor qh =
          ops::qkv_rope_cache(q_, qkv, positions, cos_sin_, L.kv_cache, L.q_norm, L.k_norm, eps);
      step("qkv_rope_cache");
      const tensor query = qh.permute({1, 0, 2}).unsqueeze(0);             // [1, heads, n, d]
      const tensor keys = L.kv_cache.slice(0, 0, 1).slice(2, 0, pos + n);  // [1, kv_heads, pos + n, d]
      const tensor values = L.kv_cache.slice(0, 1, 2).slice(2, 0, pos + n);
      // Bottom-right causal: token i sees keys 0 .. pos + i. The kernel writes [1, heads, n, d]
      // through the strides of a [n, heads, d] view, so the rows come out in o_proj's layout
      // with no transposing copy (a launch a layer: 67 us of a 16-token prefill's ~1.1 ms a layer
      // on two PoCL cores).
      attn_rows = tensor::empty(q_, {n, qs}, qkv.type());
      tensor attn = attn_rows.reshape({n, qh.size(1), qh.size(2)}).permute({1, 0, 2}).unsqueeze(0);
      ops::scaled_dot_product_attention_out(q_, attn, query, keys, values, {}, true);
      step("attention");
    }
    const tensor o = ops::linear(q_, attn_rows, L.o_proj);
    step("o_proj");
    h = ops::fused_add_rms_norm(q_, o, x, L.post_norm, eps);
    step("add_rms_norm");
    tensor act;
    // Decode: the gate/up GEMV and SiLU * mul in one kernel (block-quantized weights on CPUs).
    if (n == 1 && fusions_.mlp && mlp_fusable_) {
      act = ops::linear_silu_and_mul(q_, h, L.gate_up);
      step("gate_up_silu");
    } else {
      const tensor gate_up = ops::linear(q_, h, L.gate_up);  // [n, 2 ffn]
      step("gate_up_proj");
      act = ops::silu_and_mul(q_, gate_up);
      step("silu_and_mul");
    }
    mlp_out = ops::linear(q_, act, L.down);
    step("down_proj");
  }
  h = ops::fused_add_rms_norm(q_, mlp_out, x, final_norm_, eps);
  step("add_rms_norm");
  if (capture_) layer_out_[c_.num_layers - 1] = x.to_floats(q_);
  const tensor logits = ops::linear(q_, h.slice(0, n - 1, n), lm_head_);  // [1, vocab]
  step("lm_head");
  return logits;
}

// One token's attention rows [1, q] from its qkv row: q/k norm, RoPE, the k/v append at
// `positions` and attention over the cache up to it (a length read on the device), in one kernel
// with the attention fusion; qkv_rope_cache + kv_cache_attention without it.
tensor decoder::decode_attention_rows(layer_weights& L, const tensor& qkv, const tensor& positions) {
  const double eps = c_.rms_eps;
  if (fusions_.attention) {
    tensor rows = ops::decode_attention(q_, qkv, positions, cos_sin_, L.kv_cache, L.q_norm, L.k_norm, eps);
    step("attention");
    return rows;
  }
  const tensor qh = ops::qkv_rope_cache(q_, qkv, positions, cos_sin_, L.kv_cache, L.q_norm, L.k_norm, eps);
  step("qkv_rope_cache");
  tensor rows = ops::kv_cache_attention(q_, qh, L.kv_cache, positions);
  step("attention");
  return rows;
}

// One token with the norm fusion: the residual adds ride the o/down projections' epilogues
// (addmm_out into x: each output element read and written by the same work-item), and each
// RMSNorm is read inside the GEMV that consumes it: five launches a layer against seven. With the
// block fusion, post_attention does everything after the attention in one call: three a layer.
tensor decoder::forward_fused_norms(tensor& x, const tensor& positions) {
  const double eps = c_.rms_eps;
  for (std::int64_t l = 0; l < c_.num_layers; ++l) {
    auto& L = layers_[l];
    const tensor qkv = ops::rms_norm_linear(q_, x, L.input_norm, L.qkv, L.qkv_bias, eps);  // [1, q + 2 kv]
    step("norm_qkv_proj");
    const tensor attn_rows = decode_attention_rows(L, qkv, positions);
    if (fusions_.block && block_fusable_) {
      // x += o_proj(attn); x += down(silu(gate(norm(x))) * up(norm(x))): one call.
      ops::post_attention_out(q_, x, x, attn_rows, L.o_proj, L.post_norm, L.gate_up, L.down, eps);
      step("post_attention");
    } else {
      ops::addmm_out(q_, x, x, attn_rows, L.o_proj.transpose(0, 1));  // x += o_proj(attn)
      step("o_proj_add");
      tensor act;
      if (fusions_.mlp && mlp_fusable_) {
        act = ops::linear_silu_and_mul(q_, x, L.gate_up, L.post_norm, eps);
        step("norm_gate_up_silu");
      } else {
        const tensor gate_up = ops::rms_norm_linear(q_, x, L.post_norm, L.gate_up, {}, eps);  // [1, 2 ffn]
        step("norm_gate_up_proj");
        act = ops::silu_and_mul(q_, gate_up);
        step("silu_and_mul");
      }
      ops::addmm_out(q_, x, x, act, L.down.transpose(0, 1));  // x += down_proj(act)
      step("down_proj_add");
    }
    if (capture_) layer_out_[l] = x.to_floats(q_);
  }
  const tensor logits = ops::rms_norm_linear(q_, x, final_norm_, lm_head_, {}, eps);  // [1, vocab]
  step("norm_lm_head");
  return logits;
}

void decoder::record_decode_graph(bool greedy) {
  if (timer_ || capture_)
    throw error(errc::invalid_argument, "llm::decoder",
                "a decode graph cannot be recorded with a step timer or layer capture on (they wait on "
                "the queue); turn the graph off for those passes");
  if (!step_id_) {
    step_id_ = std::make_unique<graph_param<std::int64_t>>(q_, 0);
    step_pos_ = std::make_unique<graph_param<std::int64_t>>(q_, 0);
    step_id_t_ = tensor(step_id_->get_buffer().reinterpret<std::byte>(), {1}, {1}, 0, dtype::i64);
    step_pos_t_ = tensor(step_pos_->get_buffer().reinterpret<std::byte>(), {1}, {1}, 0, dtype::i64);
  }
  decode_graph_ = graph::record(q_, [&] {
    graph_logits_ = forward_at(step_id_t_, step_pos_t_, -1);
    // Greedy: the next id lands where the next replay's embedding reads it.
    if (greedy) ops::argmax_out(q_, step_id_t_, graph_logits_, 1);
  });
  graph_greedy_ = greedy;
  graph_generation_ = dispatch::routing_generation();
  ++graph_recordings_;
}

std::size_t decoder::decode_step_commands() {
  if (!decode_graph_ || graph_generation_ != dispatch::routing_generation())
    record_decode_graph(graph_greedy_);
  return decode_graph_.command_count();
}

std::size_t decoder::prepare_timed_step(const char* what) {
  if (!use_graph_)
    throw error(errc::invalid_argument, what,
                "decode steps are timed from the recorded decode graph; turn the graph on (set_graph)");
  check_room(1, what);
  const std::size_t commands = decode_step_commands();  // records the graph if needed
  step_pos_->set(q_, pos_);
  return commands;
}

std::vector<graph::command_time> decoder::time_decode_step() {
  prepare_timed_step("llm::decoder::time_decode_step");
  return decode_graph_.replay_timed(timing_queue());
}

queue& decoder::timing_queue() {
  if (!timing_queue_) {
    queue_options profiling;
    profiling.enable_profiling = true;
    timing_queue_.emplace(q_.get_context(), profiling);
  }
  return *timing_queue_;
}

decoder::step_span decoder::device_step_span() {
  const std::size_t commands = prepare_timed_step("llm::decoder::device_step_span");
  q_.wait();
  queue& tq = timing_queue();
  // 256 MiB a fill on GPUs; the in-order timing queue runs the fills, then the step. CPU devices
  // run one small fill, which only marks where the step starts.
  const bool cpu = q_.get_device().is_cpu();
  if (!blocker_) {
    blocker_.emplace(q_.get_context(), cpu ? std::size_t{16} : std::size_t{64} << 20);
    tq.fill(*blocker_, 0u).wait();  // first touch
    event e = tq.fill(*blocker_, 1u);
    e.wait();
    blocker_fill_seconds_ = std::max(1e-6, static_cast<double>(e.profiling().duration_ns()) * 1e-9);
  }
  const double hold = 25e-6 * static_cast<double>(commands);
  const int fills = cpu ? 1 : std::clamp(static_cast<int>(std::ceil(hold / blocker_fill_seconds_)), 1, 1000);
  event before;
  for (int i = 0; i < fills; ++i) before = tq.fill(*blocker_, static_cast<std::uint32_t>(i));
  event last = decode_graph_.replay(tq);
  last.wait();
  const profiling_info l = last.profiling(), b = before.profiling();
  step_span s;
  s.seconds = l.end_ns > b.end_ns ? static_cast<double>(l.end_ns - b.end_ns) * 1e-9 : 0.0;
  s.queued_ahead = l.queued_ns <= b.end_ns;
  return s;
}

void decoder::replay_step(bool greedy, std::optional<std::int32_t> id) {
  check_room(1, "llm::decoder::generate");
  if (!decode_graph_ || graph_greedy_ != greedy || graph_generation_ != dispatch::routing_generation())
    record_decode_graph(greedy);
  // The step's two scalars, then the recorded step: nothing else is enqueued.
  step_pos_->set(q_, pos_);
  if (id) step_id_->set(q_, *id);
  decode_graph_.replay(q_);
  ++pos_;
}

decoder::generation decoder::generate(std::span<const std::int32_t> prompt, std::int64_t new_tokens,
                                      const controls* options) {
  generation g;
  if (new_tokens <= 0) return g;
  auto read_id = [&](const tensor& ids) {
    const auto bytes = ids.to_host(q_);
    std::int64_t v;
    std::memcpy(&v, bytes.data(), sizeof v);
    return static_cast<std::int32_t>(v);
  };
  sampler* chooser =
      options && options->chooser && !options->chooser->options().greedy() ? options->chooser : nullptr;
  // Greedy: argmax on the device, its i64 id fed to the next forward as is. Sampling: the
  // logits come to the host and the chosen id goes back up.
  // A new id: kept, streamed, and whether it ends the generation.
  auto keep = [&](std::int32_t id) {
    g.tokens.push_back(id);
    if (options && options->on_token) options->on_token(id);
    return options &&
           std::find(options->stop_ids.begin(), options->stop_ids.end(), id) != options->stop_ids.end();
  };
  auto next = [&](const tensor& logits, tensor& ids) {
    std::int32_t id;
    if (chooser) {
      const auto host = logits.to_floats(q_);
      id = chooser->sample(host);
      const std::int64_t id64 = id;
      ids = tensor::from_host(q_, &id64, {1}, dtype::i64);
    } else {
      ids = ops::argmax(q_, logits, 1);
      step("argmax");
      id = read_id(ids);
    }
    return keep(id);
  };
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  tensor logits = forward(prompt);
  tensor ids;
  bool stop = next(logits, ids);
  auto t1 = clock::now();
  g.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  g.first_logits = logits.to_floats(q_);
  t1 = clock::now();
  const bool greedy = chooser == nullptr;
  if (use_graph_ && greedy && run_ahead_ && !(options && options->on_logits) && !stop && new_tokens > 1) {
    // Step k's id lands in id_slots_[k % 2] when read[k % 2] completes. Step i + 1 goes out before
    // step i's id is waited for, where the cache has room for it; where it has none, it goes out
    // after, and fails in check_room where it would one step at a time.
    event read[2];
    std::int64_t issued = 0;
    auto issue = [&] {
      ++issued;
      replay_step(true, issued == 1 ? std::optional(g.tokens.back()) : std::nullopt);
      read[issued % 2] = q_.submit([&](handler& h) {
        accessor<std::int64_t> id(step_id_->get_buffer(), h, read_only);
        h.copy_to_host(id, &id_slots_[issued % 2], sizeof(std::int64_t));
      });
    };
    issue();
    for (std::int64_t i = 1;; ++i) {
      const bool more = i + 1 < new_tokens, room = pos_ + 1 <= c_.max_seq_len;
      if (more && room) issue();
      read[i % 2].wait();
      stop = keep(static_cast<std::int32_t>(id_slots_[i % 2]));
      if (stop || !more) {
        if (issued > i) {  // the step run past a stop: its id is dropped, its position given back
          read[issued % 2].wait();
          pos_ -= issued - i;
        }
        break;
      }
      if (!room) issue();
    }
  } else {
    for (std::int64_t i = 1; i < new_tokens && !stop; ++i) {
      if (!use_graph_) {
        logits = forward(ids);
        if (options && options->on_logits) options->on_logits(logits.to_floats(q_));
        stop = next(logits, ids);
        continue;
      }
      replay_step(greedy, i == 1 || !greedy ? std::optional(g.tokens.back()) : std::nullopt);
      if (options && options->on_logits) options->on_logits(graph_logits_.to_floats(q_));
      stop = keep(greedy ? read_id(step_id_t_) : chooser->sample(graph_logits_.to_floats(q_)));
    }
  }
  g.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return g;
}

}  // namespace prism::llm
