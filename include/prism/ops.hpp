// SPDX-License-Identifier: Apache-2.0
// The public op API: every call goes through prism's dispatcher, which picks a backend (opencl,
// clblast, host) and a kernel config per call and records the decision (see docs/dispatch.md).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "prism/dtype.hpp"
#include "prism/runtime/queue.hpp"
#include "prism/tensor.hpp"

// Conventions, applied to every op:
// - The first argument is the queue the work is enqueued on; inputs follow as const tensor&,
//   then attributes, with defaults where PyTorch has them. Each default equals the op
//   descriptor's attribute default (tests/dispatch/test_op_surface.cpp checks it).
// - `op(q, inputs..., attrs...)` allocates and returns a new contiguous result tensor.
// - `op_out(q, out, inputs..., attrs...)` writes into `out` (which must already have the
//   result's shape and dtype; it may be a strided view where the op allows it) and returns
//   `out`. `out` may alias an input only where the op says so (in-place forms).
// - Inputs may be strided views (transposes, slices, expands); nothing is copied to make them
//   contiguous unless the chosen implementation needs it.
// - Bad input throws prism::error(errc::invalid_argument) naming the op, the argument, what was
//   given and what is valid; nothing is enqueued then.
// - Work is asynchronous: results are ordered by the runtime's dependency tracking; read them
//   with tensor::to_host / to_floats or wait on the queue.
// Thread safety: every function may be called from several threads at once, on one queue or
// several.
namespace prism::ops {

/// A list of dims (negative counts from the end). An empty list means "all dims".
using dim_list = std::vector<int>;

/// gelu's form: exact (erf) or PyTorch's tanh approximation.
enum class gelu_approx : std::uint8_t { none, tanh };

/// Rotary embedding layouts: NeoX rotates the two halves of the rotary dims, GPT-J rotates
/// interleaved (even, odd) pairs.
enum class rope_style : std::uint8_t { neox, gptj };

// ---------------------------------------------------------------------------------------------
// Elementwise unary ops (all float dtypes; neg/abs/relu also i32/i64). Result: same shape and
// dtype as x. `_out` may alias x (in place).
tensor neg(queue& q, const tensor& x);
tensor abs(queue& q, const tensor& x);
tensor exp(queue& q, const tensor& x);
tensor log(queue& q, const tensor& x);
tensor sqrt(queue& q, const tensor& x);
tensor rsqrt(queue& q, const tensor& x);
tensor sin(queue& q, const tensor& x);
tensor cos(queue& q, const tensor& x);
tensor tanh(queue& q, const tensor& x);
tensor sigmoid(queue& q, const tensor& x);
tensor relu(queue& q, const tensor& x);
tensor gelu(queue& q, const tensor& x, gelu_approx approximate = gelu_approx::none);
tensor silu(queue& q, const tensor& x);

tensor& neg_out(queue& q, tensor& out, const tensor& x);
tensor& abs_out(queue& q, tensor& out, const tensor& x);
tensor& exp_out(queue& q, tensor& out, const tensor& x);
tensor& log_out(queue& q, tensor& out, const tensor& x);
tensor& sqrt_out(queue& q, tensor& out, const tensor& x);
tensor& rsqrt_out(queue& q, tensor& out, const tensor& x);
tensor& sin_out(queue& q, tensor& out, const tensor& x);
tensor& cos_out(queue& q, tensor& out, const tensor& x);
tensor& tanh_out(queue& q, tensor& out, const tensor& x);
tensor& sigmoid_out(queue& q, tensor& out, const tensor& x);
tensor& relu_out(queue& q, tensor& out, const tensor& x);
tensor& gelu_out(queue& q, tensor& out, const tensor& x, gelu_approx approximate = gelu_approx::none);
tensor& silu_out(queue& q, tensor& out, const tensor& x);

// ---------------------------------------------------------------------------------------------
// Binary ops with NumPy broadcasting. Tensor operands must share a dtype; a scalar operand
// (double) takes the tensor's dtype. add/sub compute a + alpha * b. Result shape: the
// broadcast of both shapes. `_out` may alias a or b when it has the broadcast shape.
tensor add(queue& q, const tensor& a, const tensor& b, double alpha = 1.0);
tensor add(queue& q, const tensor& a, double b, double alpha = 1.0);
tensor sub(queue& q, const tensor& a, const tensor& b, double alpha = 1.0);
tensor sub(queue& q, const tensor& a, double b, double alpha = 1.0);
tensor sub(queue& q, double a, const tensor& b, double alpha = 1.0);
tensor mul(queue& q, const tensor& a, const tensor& b);
tensor mul(queue& q, const tensor& a, double b);
tensor div(queue& q, const tensor& a, const tensor& b);
tensor div(queue& q, const tensor& a, double b);
tensor div(queue& q, double a, const tensor& b);
tensor maximum(queue& q, const tensor& a, const tensor& b);
tensor maximum(queue& q, const tensor& a, double b);
tensor minimum(queue& q, const tensor& a, const tensor& b);
tensor minimum(queue& q, const tensor& a, double b);
tensor pow(queue& q, const tensor& base, const tensor& exponent);
tensor pow(queue& q, const tensor& base, double exponent);
tensor pow(queue& q, double base, const tensor& exponent);

tensor& add_out(queue& q, tensor& out, const tensor& a, const tensor& b, double alpha = 1.0);
tensor& add_out(queue& q, tensor& out, const tensor& a, double b, double alpha = 1.0);
tensor& sub_out(queue& q, tensor& out, const tensor& a, const tensor& b, double alpha = 1.0);
tensor& sub_out(queue& q, tensor& out, const tensor& a, double b, double alpha = 1.0);
tensor& sub_out(queue& q, tensor& out, double a, const tensor& b, double alpha = 1.0);
tensor& mul_out(queue& q, tensor& out, const tensor& a, const tensor& b);
tensor& mul_out(queue& q, tensor& out, const tensor& a, double b);
tensor& div_out(queue& q, tensor& out, const tensor& a, const tensor& b);
tensor& div_out(queue& q, tensor& out, const tensor& a, double b);
tensor& div_out(queue& q, tensor& out, double a, const tensor& b);
tensor& maximum_out(queue& q, tensor& out, const tensor& a, const tensor& b);
tensor& maximum_out(queue& q, tensor& out, const tensor& a, double b);
tensor& minimum_out(queue& q, tensor& out, const tensor& a, const tensor& b);
tensor& minimum_out(queue& q, tensor& out, const tensor& a, double b);
tensor& pow_out(queue& q, tensor& out, const tensor& base, const tensor& exponent);
tensor& pow_out(queue& q, tensor& out, const tensor& base, double exponent);
tensor& pow_out(queue& q, tensor& out, double base, const tensor& exponent);

// ---------------------------------------------------------------------------------------------
// Reductions over `dims` (empty = all dims), keepdim as in PyTorch. sum/mean/max/min keep x's
// dtype (accumulating in f32); argmax reduces one dim (or the flattened tensor when dim is
// nullopt) and returns i64 indices of the first maximum.
tensor sum(queue& q, const tensor& x, const dim_list& dims = {}, bool keepdim = false);
tensor mean(queue& q, const tensor& x, const dim_list& dims = {}, bool keepdim = false);
tensor max(queue& q, const tensor& x, const dim_list& dims = {}, bool keepdim = false);
tensor min(queue& q, const tensor& x, const dim_list& dims = {}, bool keepdim = false);
tensor argmax(queue& q, const tensor& x, std::optional<int> dim = std::nullopt, bool keepdim = false);

tensor& sum_out(queue& q, tensor& out, const tensor& x, const dim_list& dims = {}, bool keepdim = false);
tensor& mean_out(queue& q, tensor& out, const tensor& x, const dim_list& dims = {}, bool keepdim = false);
tensor& max_out(queue& q, tensor& out, const tensor& x, const dim_list& dims = {}, bool keepdim = false);
tensor& min_out(queue& q, tensor& out, const tensor& x, const dim_list& dims = {}, bool keepdim = false);
tensor& argmax_out(queue& q, tensor& out, const tensor& x, std::optional<int> dim = std::nullopt,
                   bool keepdim = false);

// ---------------------------------------------------------------------------------------------
// Softmax family over one dim. `_out` may alias x.
tensor softmax(queue& q, const tensor& x, int dim = -1);
tensor log_softmax(queue& q, const tensor& x, int dim = -1);
tensor& softmax_out(queue& q, tensor& out, const tensor& x, int dim = -1);
tensor& log_softmax_out(queue& q, tensor& out, const tensor& x, int dim = -1);

// ---------------------------------------------------------------------------------------------
// Norms over the last dim. weight/bias are 1-D of the last dim's size; an undefined tensor
// (tensor{}) means "none" (scale 1, shift 0).
tensor layer_norm(queue& q, const tensor& x, const tensor& weight = {}, const tensor& bias = {},
                  double eps = 1e-5);
tensor rms_norm(queue& q, const tensor& x, const tensor& weight = {}, double eps = 1e-6);
/// residual <- x + residual (in place); returns rms_norm(residual) * weight. vLLM's in-place
/// form is fused_add_rms_norm_out(q, x, x, residual, weight, eps).
tensor fused_add_rms_norm(queue& q, const tensor& x, tensor& residual, const tensor& weight = {},
                          double eps = 1e-6);

tensor& layer_norm_out(queue& q, tensor& out, const tensor& x, const tensor& weight = {},
                       const tensor& bias = {}, double eps = 1e-5);
tensor& rms_norm_out(queue& q, tensor& out, const tensor& x, const tensor& weight = {}, double eps = 1e-6);
tensor& fused_add_rms_norm_out(queue& q, tensor& out, const tensor& x, tensor& residual,
                               const tensor& weight = {}, double eps = 1e-6);
/// residual <- x + residual (in place); returns layer_norm(residual) * weight + bias: a BERT
/// block's `LayerNorm(hidden + residual)` in one pass (the sum is kept in `residual`).
tensor fused_add_layer_norm(queue& q, const tensor& x, tensor& residual, const tensor& weight = {},
                            const tensor& bias = {}, double eps = 1e-5);
tensor& fused_add_layer_norm_out(queue& q, tensor& out, const tensor& x, tensor& residual,
                                 const tensor& weight = {}, const tensor& bias = {}, double eps = 1e-5);
/// x / max(||x||_2, eps) over the last dim (torch.nn.functional.normalize(x, p=2, dim=-1)).
tensor l2_normalize(queue& q, const tensor& x, double eps = 1e-12);
tensor& l2_normalize_out(queue& q, tensor& out, const tensor& x, double eps = 1e-12);

// ---------------------------------------------------------------------------------------------
// Pooling. x: [batch, tokens, dim] (any strides); mask: [batch, tokens], bool / i32 / i64
// (nonzero = keep, e.g. Hugging Face's attention_mask) or x's dtype (weights); undefined = all
// tokens. Returns [batch, dim] = sum_t mask * x / max(sum_t mask, eps) (sentence-transformers'
// mean pooling; an all-masked row gives 0, and masked tokens are skipped, so NaN there stays out).
tensor masked_mean(queue& q, const tensor& x, const tensor& mask = {}, double eps = 1e-9);
tensor& masked_mean_out(queue& q, tensor& out, const tensor& x, const tensor& mask = {}, double eps = 1e-9);

// ---------------------------------------------------------------------------------------------
// Rotary position embedding. x: [tokens, heads, head_dim] with positions [tokens], or
// [batch, seq, heads, head_dim] with positions [batch, seq] (contiguous); positions are i32/i64
// indices into the caches; cos_cache/sin_cache: [max_positions, rotary_dim / 2] (any float
// dtype). The first `rotary_dim` entries of head_dim are rotated, the rest pass through.
// `_out` may alias x (in place). When cos_cache and sin_cache are the two halves of one
// [max_positions, rotary_dim] tensor (cache.slice(1, 0, r/2) and cache.slice(1, r/2, r)) no copy
// is made; otherwise they are concatenated on every call.
tensor rotary_embedding(queue& q, const tensor& x, const tensor& positions, const tensor& cos_cache,
                        const tensor& sin_cache, rope_style style = rope_style::neox);
tensor& rotary_embedding_out(queue& q, tensor& out, const tensor& x, const tensor& positions,
                             const tensor& cos_cache, const tensor& sin_cache,
                             rope_style style = rope_style::neox);
/// vLLM's in-place form: query [T, Hq, D] and key [T, Hk, D] (or tensor{}) rotated in place with
/// positions [T] and cos_sin_cache [max_positions, rotary_dim] (cos | sin halves). Returns query.
tensor& rotary_embedding_(queue& q, tensor& query, tensor& key, const tensor& positions,
                          const tensor& cos_sin_cache, rope_style style = rope_style::neox);

// ---------------------------------------------------------------------------------------------
// Gated activations (vLLM): x: [..., 2 * d] -> [..., d] = act(x[..., :d]) * x[..., d:].
tensor silu_and_mul(queue& q, const tensor& x);
tensor gelu_and_mul(queue& q, const tensor& x, gelu_approx approximate = gelu_approx::none);
tensor& silu_and_mul_out(queue& q, tensor& out, const tensor& x);
/// silu_and_mul(linear(x, weight)) in one kernel for a fused gate|up weight [2F, K] (F gate rows,
/// then F up rows): x [M, K] -> [M, F]. A GEMV, for decode's small M (SwiGLU's first half).
tensor linear_silu_and_mul(queue& q, const tensor& x, const tensor& weight);
/// The same after an RMSNorm of x: silu_and_mul(linear(rms_norm(x, norm_weight, eps), weight)),
/// the norm read in the GEMV's loads (no normalized copy of x, no launch of its own).
tensor linear_silu_and_mul(queue& q, const tensor& x, const tensor& weight, const tensor& norm_weight,
                           double eps);
/// linear(rms_norm(x, norm_weight, eps), weight, bias) in one GEMV kernel: x [M, K], norm_weight
/// [K], weight [N, K] -> [M, N]. For decode's small M; with the residual add in the previous
/// projection's epilogue (addmm_out into the residual), a decoder layer's norms cost no launch.
tensor rms_norm_linear(queue& q, const tensor& x, const tensor& norm_weight, const tensor& weight,
                       const tensor& bias = {}, double eps = 1e-6);
tensor& gelu_and_mul_out(queue& q, tensor& out, const tensor& x, gelu_approx approximate = gelu_approx::none);
/// The rest of a pre-norm SwiGLU decoder layer after attention, for decode's small M:
///   h = residual + attn o_weightᵀ;  out = h + down_weight (silu(n gateᵀ) * (n upᵀ)),
///   n = rms_norm(h, norm_weight, eps),
/// with residual [M, H], attn [M, A], o_weight [H, A], norm_weight [H], gate_up_weight [2I, H]
/// (I gate rows, then I up rows), down_weight [H, I] -> [M, H]. Its three GEMVs run as one launch
/// where the route's config says chain=1. post_attention_out may write into the residual itself.
tensor post_attention(queue& q, const tensor& residual, const tensor& attn, const tensor& o_weight,
                      const tensor& norm_weight, const tensor& gate_up_weight, const tensor& down_weight,
                      double eps = 1e-6);
tensor& post_attention_out(queue& q, tensor& out, const tensor& residual, const tensor& attn,
                           const tensor& o_weight, const tensor& norm_weight, const tensor& gate_up_weight,
                           const tensor& down_weight, double eps = 1e-6);

// ---------------------------------------------------------------------------------------------
// Indexing and layout.
/// weight: [num_embeddings, dim]; indices: i32/i64 of any shape -> [*indices.shape, dim].
/// An index outside [0, num_embeddings) raises errc::invalid_argument naming it.
tensor embedding(queue& q, const tensor& weight, const tensor& indices);
tensor& embedding_out(queue& q, tensor& out, const tensor& weight, const tensor& indices);
/// Concatenation along `dim`; all tensors share dtype and every other extent.
tensor cat(queue& q, const std::vector<tensor>& tensors, int dim = 0);
tensor& cat_out(queue& q, tensor& out, const std::vector<tensor>& tensors, int dim = 0);
/// A contiguous copy of x (x itself, not a copy, when it is already contiguous).
tensor contiguous(queue& q, const tensor& x);
/// Copies src (broadcast to dst's shape, converted to dst's dtype) into dst, which may be a
/// strided view. Returns dst.
tensor& copy(queue& q, tensor& dst, const tensor& src);
/// x converted to `to` (RNE for f16/bf16, truncation toward zero for ints, != 0 for bool).
tensor cast(queue& q, const tensor& x, dtype to);
tensor& cast_out(queue& q, tensor& out, const tensor& x);
/// Sets every element of `out` (any view) to value, converted to out's dtype. Returns out.
tensor& fill(queue& q, tensor& out, double value);
tensor zeros(queue& q, const dims& shape, dtype t = dtype::f32);
tensor full(queue& q, const dims& shape, double value, dtype t = dtype::f32);
/// [start, end) in steps of step: ceil((end - start) / step) elements.
tensor arange(queue& q, double start, double end, double step = 1.0, dtype t = dtype::i64);
tensor arange(queue& q, double end, dtype t = dtype::i64);
tensor& arange_out(queue& q, tensor& out, double start, double step = 1.0);

// ---------------------------------------------------------------------------------------------
// Matmul family (f32, f16, bf16; f32 accumulation). Transposed operands are views
// (a.transpose(0, 1)); no copy is made for them.
/// a: [m, k], b: [k, n] -> [m, n].
tensor mm(queue& q, const tensor& a, const tensor& b);
/// a: [batch, m, k], b: [batch, k, n] -> [batch, m, n] (strided batches; batch stride 0 on one
/// side broadcasts it).
tensor bmm(queue& q, const tensor& a, const tensor& b);
/// beta * bias + alpha * (a @ b); bias broadcasts to [m, n] (typically [n]).
tensor addmm(queue& q, const tensor& bias, const tensor& a, const tensor& b, double beta = 1.0,
             double alpha = 1.0);
/// The activation linear applies in its GEMM's store epilogue, after the bias (no extra pass):
/// GELU (erf, as torch's F.gelu), GELU's tanh approximation (approximate='tanh'), SiLU.
enum class linear_activation { none, gelu, gelu_tanh, silu };
/// x: [..., in], weight: [out, in] (PyTorch layout), bias: [out] or undefined -> [..., out],
/// then `act` elementwise (BERT's intermediate dense + GELU is linear(q, x, w, b, gelu)).
tensor linear(queue& q, const tensor& x, const tensor& weight, const tensor& bias = {},
              linear_activation act = linear_activation::none);
/// numpy's matmul for the forms prism serves: 2-D @ 2-D, 3-D @ 3-D (batched), N-D @ 2-D (over
/// the leading dims of a; a 1-D a is one row). Its own op: tuned, logged and replayed as "matmul".
tensor matmul(queue& q, const tensor& a, const tensor& b);

tensor& matmul_out(queue& q, tensor& out, const tensor& a, const tensor& b);
tensor& mm_out(queue& q, tensor& out, const tensor& a, const tensor& b);
tensor& bmm_out(queue& q, tensor& out, const tensor& a, const tensor& b);
tensor& addmm_out(queue& q, tensor& out, const tensor& bias, const tensor& a, const tensor& b,
                  double beta = 1.0, double alpha = 1.0);
tensor& linear_out(queue& q, tensor& out, const tensor& x, const tensor& weight, const tensor& bias = {},
                   linear_activation act = linear_activation::none);

// ---------------------------------------------------------------------------------------------
// Attention. query: [batch, heads_q, len_q, d], key/value: [batch, heads_kv, len_kv, d(v)],
// heads_q a multiple of heads_kv (GQA: query head h reads kv head h / (heads_q / heads_kv)).
// attn_mask (optional): bool (true = keep) or float (added to scores), broadcastable to
// [batch, heads_q, len_q, len_kv]. is_causal masks key j > i + (len_kv - len_q) (bottom-right
// aligned, as in decoding with a KV cache). key_mask (optional): [batch, len_kv], bool / i32 /
// i64, nonzero = attend (Hugging Face's attention_mask; the opposite of nn.MultiheadAttention's
// key_padding_mask). All three combine: a key is seen when causal order, attn_mask and key_mask
// all allow it, as torch SDPA with the masks merged into one. A query row that sees no key gives
// zeros (torch gives NaN there). scale defaults to 1/sqrt(d). Result: [batch, heads_q, len_q, dv].
tensor scaled_dot_product_attention(queue& q, const tensor& query, const tensor& key, const tensor& value,
                                    const tensor& attn_mask = {}, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt, const tensor& key_mask = {});
tensor& scaled_dot_product_attention_out(queue& q, tensor& out, const tensor& query, const tensor& key,
                                         const tensor& value, const tensor& attn_mask = {},
                                         bool is_causal = false, std::optional<double> scale = std::nullopt,
                                         const tensor& key_mask = {});

// Decoding with a KV cache: kv_cache is [2, kv_heads, max_seq, head_dim] (keys, then values),
// and the tokens' positions [T] (i32/i64) are a device tensor, so the write position and the
// visible length are read on the device: a recorded prism::graph replays these calls for every
// decode step with only the positions changed.
/// qkv: [T, (heads + 2 kv_heads) * head_dim], the rows of a fused q|k|v projection (last dim
/// contiguous). Each q head is RMS-normalized with q_norm [head_dim] and each k head with k_norm
/// when given (Qwen3), then RoPE rotates the first rot dims by cos_sin_cache [max_pos, rot]
/// (cos | sin); returns query [T, heads, head_dim] and writes k and v to
/// kv_cache[0 / 1, :, positions[t], :]. One kernel. A position outside the cache writes nothing.
tensor qkv_rope_cache(queue& q, const tensor& qkv, const tensor& positions, const tensor& cos_sin_cache,
                      tensor& kv_cache, const tensor& q_norm = {}, const tensor& k_norm = {},
                      double eps = 1e-6, rope_style style = rope_style::neox);
tensor& qkv_rope_cache_out(queue& q, tensor& query, const tensor& qkv, const tensor& positions,
                           const tensor& cos_sin_cache, tensor& kv_cache, const tensor& q_norm = {},
                           const tensor& k_norm = {}, double eps = 1e-6, rope_style style = rope_style::neox);
/// query [T, heads, head_dim] attends kv_cache positions 0 .. positions[t] (causal by position;
/// query head h reads kv head h / (heads / kv_heads)); returns [T, heads * head_dim], the row
/// layout an output projection reads. scale defaults to 1/sqrt(head_dim).
/// One decode token: qkv_rope_cache and kv_cache_attention in one kernel. qkv is [1, (heads +
/// 2 kv_heads) * head_dim], positions [1]; writes k/v into kv_cache and returns the attention
/// output [1, heads * head_dim].
tensor decode_attention(queue& q, const tensor& qkv, const tensor& positions, const tensor& cos_sin_cache,
                        tensor& kv_cache, const tensor& q_norm = {}, const tensor& k_norm = {},
                        double eps = 1e-6, rope_style style = rope_style::neox,
                        std::optional<double> scale = std::nullopt);
tensor kv_cache_attention(queue& q, const tensor& query, const tensor& kv_cache, const tensor& positions,
                          std::optional<double> scale = std::nullopt);
tensor& kv_cache_attention_out(queue& q, tensor& out, const tensor& query, const tensor& kv_cache,
                               const tensor& positions, std::optional<double> scale = std::nullopt);

}  // namespace prism::ops
