// SPDX-License-Identifier: Apache-2.0
// Guide, part 4: a BERT-style sentence encoder on the public API (docs/guide.md quotes the marked
// parts). It runs the forward twice: with the encoder ops (fused add + layer_norm, linear's GELU
// epilogue, SDPA's key mask, masked_mean, l2_normalize) and as the same model written with plain
// ops, and checks that both agree and that the fused one needs fewer dispatches.
//   guide_encoder                                   random tiny model (CTest: guide.encoder)
//   guide_encoder MODEL INPUTS HEADS OUT            a Hugging Face BertModel's model.safetensors,
//     input_ids + attention_mask (I64) in INPUTS; writes both results to OUT and prints the
//     dispatch counts (examples/guide/encoder_check.py compares them with transformers)
#include <prism/dispatch.hpp>
#include <prism/io/safetensors.hpp>
#include <prism/ops.hpp>
#include <prism/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "guide_check.hpp"

namespace {

using prism::tensor;
namespace ops = prism::ops;

struct layer_weights {
  tensor q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, ln1_w, ln1_b, ff1_w, ff1_b, ff2_w, ff2_b, ln2_w, ln2_b;
};
struct encoder_weights {
  tensor word, pos_type, ln_w, ln_b;  // pos_type: position + token-type-0 embeddings, summed at load
  std::vector<layer_weights> layers;
  std::int64_t heads = 1;
  double eps = 1e-12;  // BERT's layer_norm_eps
};

// Hugging Face BertModel names (save_pretrained, no "bert." prefix), loaded as f32.
encoder_weights load(prism::queue& q, const prism::io::safetensors_file& file, std::int64_t heads) {
  const std::map<std::string, tensor> all = file.load_all(q, prism::dtype::f32);  // one storage
  auto get = [&](const std::string& name) { return all.at(name); };
  encoder_weights w;
  w.heads = heads;
  w.word = get("embeddings.word_embeddings.weight");
  w.pos_type = ops::add(q, get("embeddings.position_embeddings.weight"),
                        get("embeddings.token_type_embeddings.weight").slice(0, 0, 1));
  w.ln_w = get("embeddings.LayerNorm.weight");
  w.ln_b = get("embeddings.LayerNorm.bias");
  for (int i = 0; file.contains("encoder.layer." + std::to_string(i) + ".attention.self.query.weight"); ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    layer_weights l;
    l.q_w = get(p + "attention.self.query.weight"), l.q_b = get(p + "attention.self.query.bias");
    l.k_w = get(p + "attention.self.key.weight"), l.k_b = get(p + "attention.self.key.bias");
    l.v_w = get(p + "attention.self.value.weight"), l.v_b = get(p + "attention.self.value.bias");
    l.o_w = get(p + "attention.output.dense.weight"), l.o_b = get(p + "attention.output.dense.bias");
    l.ln1_w = get(p + "attention.output.LayerNorm.weight"),
    l.ln1_b = get(p + "attention.output.LayerNorm.bias");
    l.ff1_w = get(p + "intermediate.dense.weight"), l.ff1_b = get(p + "intermediate.dense.bias");
    l.ff2_w = get(p + "output.dense.weight"), l.ff2_b = get(p + "output.dense.bias");
    l.ln2_w = get(p + "output.LayerNorm.weight"), l.ln2_b = get(p + "output.LayerNorm.bias");
    w.layers.push_back(l);
  }
  return w;
}

// [encoder]
// ids, mask: [batch, tokens] (i64; mask 1 = token, 0 = padding). Returns [batch, hidden]:
// mean-pooled, L2-normalized sentence embeddings.
tensor encode(prism::queue& q, const encoder_weights& w, const tensor& ids, const tensor& mask) {
  const std::int64_t B = ids.size(0), T = ids.size(1), H = w.word.size(1), heads = w.heads;
  // [B, T, H] -> [B, heads, T, H / heads], a view: attention reads any strides.
  auto split_heads = [&](const tensor& t) { return t.reshape({B, T, heads, H / heads}).transpose(1, 2); };

  tensor x = ops::embedding(q, w.word, ids);
  x = ops::layer_norm(q, ops::add(q, x, w.pos_type.slice(0, 0, T)), w.ln_w, w.ln_b, w.eps);
  for (const layer_weights& l : w.layers) {
    tensor ctx = tensor::empty(q, {B, T, H}, x.type());
    tensor ctx_heads = split_heads(ctx);  // attention writes the heads straight into [B, T, H]
    ops::scaled_dot_product_attention_out(q, ctx_heads, split_heads(ops::linear(q, x, l.q_w, l.q_b)),
                                          split_heads(ops::linear(q, x, l.k_w, l.k_b)),
                                          split_heads(ops::linear(q, x, l.v_w, l.v_b)), /*attn_mask=*/{},
                                          /*is_causal=*/false, /*scale=*/std::nullopt, /*key_mask=*/mask);
    // x <- x + attention output (in place); the result is LayerNorm of that sum.
    x = ops::fused_add_layer_norm(q, ops::linear(q, ctx, l.o_w, l.o_b), x, l.ln1_w, l.ln1_b, w.eps);
    tensor h = ops::linear(q, x, l.ff1_w, l.ff1_b, ops::linear_activation::gelu);  // GELU in the GEMM
    x = ops::fused_add_layer_norm(q, ops::linear(q, h, l.ff2_w, l.ff2_b), x, l.ln2_w, l.ln2_b, w.eps);
  }
  return ops::l2_normalize(q, ops::masked_mean(q, x, mask));
}
// [encoder]

// The same model with plain ops only, as it had to be written before the encoder ops.
tensor encode_unfused(prism::queue& q, const encoder_weights& w, const tensor& ids, const tensor& mask) {
  const std::int64_t B = ids.size(0), T = ids.size(1), H = w.word.size(1), heads = w.heads;
  auto split_heads = [&](const tensor& t) { return t.reshape({B, T, heads, H / heads}).transpose(1, 2); };
  tensor maskf = ops::cast(q, mask, prism::dtype::f32);
  // Padding as an additive mask: (1 - mask) * -1e9, broadcast over heads and query rows.
  tensor additive = ops::mul(q, ops::sub(q, 1.0, maskf), -1e9).reshape({B, 1, 1, T});
  tensor x = ops::embedding(q, w.word, ids);
  x = ops::layer_norm(q, ops::add(q, x, w.pos_type.slice(0, 0, T)), w.ln_w, w.ln_b, w.eps);
  for (const layer_weights& l : w.layers) {
    tensor ctx = tensor::empty(q, {B, T, H}, x.type());
    tensor ctx_heads = split_heads(ctx);
    ops::scaled_dot_product_attention_out(q, ctx_heads, split_heads(ops::linear(q, x, l.q_w, l.q_b)),
                                          split_heads(ops::linear(q, x, l.k_w, l.k_b)),
                                          split_heads(ops::linear(q, x, l.v_w, l.v_b)), additive);
    x = ops::layer_norm(q, ops::add(q, ops::linear(q, ctx, l.o_w, l.o_b), x), l.ln1_w, l.ln1_b, w.eps);
    tensor h = ops::gelu(q, ops::linear(q, x, l.ff1_w, l.ff1_b));
    x = ops::layer_norm(q, ops::add(q, ops::linear(q, h, l.ff2_w, l.ff2_b), x), l.ln2_w, l.ln2_b, w.eps);
  }
  tensor m3 = maskf.reshape({B, T, 1});
  tensor mean =
      ops::div(q, ops::sum(q, ops::mul(q, x, m3), {1}), ops::maximum(q, ops::sum(q, m3, {1}), 1e-9));
  tensor norm = ops::sqrt(q, ops::sum(q, ops::mul(q, mean, mean), {1}, true));
  return ops::div(q, mean, ops::maximum(q, norm, 1e-12));
}

// Dispatches (op calls routed by the dispatcher) that `run` makes, after it has run once.
template <class F>
std::uint64_t count_dispatches(prism::queue& q, F run) {
  run();
  q.wait();
  prism::dispatch::reset_statistics();
  run();
  q.wait();
  std::uint64_t calls = 0;
  for (const auto& s : prism::dispatch::statistics()) calls += s.calls;
  return calls;
}

// A random tiny BertModel checkpoint (vocab 40, hidden 32, 4 heads, 2 layers, FFN 64).
void write_random_model(const std::string& path) {
  const std::int64_t V = 40, P = 16, H = 32, I = 64, L = 2;
  std::mt19937 rng(7);
  std::vector<std::vector<float>> store;
  std::vector<prism::io::safetensor_data> list;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape, float centre, float spread) {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    std::uniform_real_distribution<float> u(centre - spread, centre + spread);
    store.emplace_back(static_cast<std::size_t>(n));
    for (auto& v : store.back()) v = u(rng);
    list.push_back({name, shape, {}});
  };
  add("embeddings.word_embeddings.weight", {V, H}, 0, 1);
  add("embeddings.position_embeddings.weight", {P, H}, 0, 0.5f);
  add("embeddings.token_type_embeddings.weight", {2, H}, 0, 0.5f);
  add("embeddings.LayerNorm.weight", {H}, 1, 0.1f);
  add("embeddings.LayerNorm.bias", {H}, 0, 0.1f);
  for (int i = 0; i < L; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    for (const char* m :
         {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      add(p + m + ".weight", {H, H}, 0, 0.3f);
      add(p + m + ".bias", {H}, 0, 0.1f);
    }
    add(p + "intermediate.dense.weight", {I, H}, 0, 0.3f);
    add(p + "intermediate.dense.bias", {I}, 0, 0.1f);
    add(p + "output.dense.weight", {H, I}, 0, 0.2f);
    add(p + "output.dense.bias", {H}, 0, 0.1f);
    for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      add(p + n + ".weight", {H}, 1, 0.1f);
      add(p + n + ".bias", {H}, 0, 0.1f);
    }
  }
  for (std::size_t i = 0; i < list.size(); ++i) list[i].values = store[i];
  prism::io::write_safetensors(path, list, prism::dtype::f32);
}

}  // namespace

int main(int argc, char** argv) {
  prism::queue q;
  std::string model_path, out_path;
  std::int64_t heads = 4;
  tensor ids, mask;
  if (argc == 5) {
    model_path = argv[1];
    heads = std::stoll(argv[3]);
    out_path = argv[4];
    prism::io::safetensors_file inputs(argv[2]);
    ids = inputs.load(q, "input_ids");
    mask = inputs.load(q, "attention_mask");
  } else {
    model_path = (std::filesystem::temp_directory_path() / "prism_guide_encoder.safetensors").string();
    write_random_model(model_path);
    // Three sentences of 7, 4 and 2 tokens, padded to 7.
    std::vector<float> id_values = {1, 5, 9, 3, 22, 8, 2, 1, 7, 30, 2, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0};
    std::vector<float> mask_values = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
    ids = tensor::from_floats(q, id_values, {3, 7}, prism::dtype::i64);
    mask = tensor::from_floats(q, mask_values, {3, 7}, prism::dtype::i64);
  }
  const prism::io::safetensors_file file(model_path);
  const encoder_weights w = load(q, file, heads);

  tensor fused, unfused;
  const std::uint64_t fused_calls = count_dispatches(q, [&] { fused = encode(q, w, ids, mask); });
  const std::uint64_t unfused_calls = count_dispatches(q, [&] { unfused = encode_unfused(q, w, ids, mask); });
  std::printf("dispatches per forward: unfused=%llu fused=%llu (%zu layers)\n",
              (unsigned long long)unfused_calls, (unsigned long long)fused_calls, w.layers.size());
  const std::vector<float> a = fused.to_floats(q), b = unfused.to_floats(q);
  expect_values("fused == unfused", a, b, 1e-4f);
  if (fused_calls >= unfused_calls) {
    std::fprintf(stderr, "the encoder ops saved no dispatch\n");
    return 1;
  }
  if (!out_path.empty()) {
    prism::io::write_safetensors(out_path,
                                 {{"embeddings", {fused.size(0), fused.size(1)}, a},
                                  {"embeddings_unfused", {unfused.size(0), unfused.size(1)}, b}},
                                 prism::dtype::f32,
                                 {{"fused_dispatches", std::to_string(fused_calls)},
                                  {"unfused_dispatches", std::to_string(unfused_calls)}});
  } else {
    std::filesystem::remove(model_path);
  }
  return 0;
}
