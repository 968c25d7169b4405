// SPDX-License-Identifier: Apache-2.0
// The public op API (prism/ops.hpp): each function names its op once, in an op_handle, which
// builds the op_call and hands it to the dispatcher. Plain functions, no macros, so
// `grep '"softmax"'` finds every entry point of an op. Composite forms (scalar first operands,
// matmul) are written here.
#include "prism/ops.hpp"

#include <cmath>

#include "dispatch/dispatcher.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/error.hpp"

namespace prism::ops {
namespace {

using dispatch::dispatch_call;

// A registered op, looked up once (each public function keeps one in a function-local static):
// the registry index is stable for the process, so the warm path does no name lookup.
class op_handle {
 public:
  explicit op_handle(const char* name) : name_(name), index_(dispatch::op_index(name)) {}

  // A new result (the op's first output, allocated by the dispatcher).
  tensor run(queue& q, std::vector<tensor> inputs, attr_map attrs = {}) const {
    op_call c = make(std::move(inputs), {}, std::move(attrs));
    dispatch_call(q, index_, c);
    return c.outputs[0];
  }
  // Into `out`, the op's one output.
  tensor& run_out(queue& q, tensor& out, std::vector<tensor> inputs, attr_map attrs = {}) const {
    op_call c = make(std::move(inputs), {out}, std::move(attrs));
    dispatch_call(q, index_, c);
    return out;
  }
  // Every output given (in-place ops).
  void run_into(queue& q, std::vector<tensor> inputs, std::vector<tensor> outputs, attr_map attrs) const {
    op_call c = make(std::move(inputs), std::move(outputs), std::move(attrs));
    dispatch_call(q, index_, c);
  }

 private:
  op_call make(std::vector<tensor> inputs, std::vector<tensor> outputs, attr_map attrs) const {
    op_call c;
    c.op = name_;
    c.inputs = std::move(inputs);
    c.outputs = std::move(outputs);
    c.attrs = std::move(attrs);
    return c;
  }
  const char* name_;
  int index_;
};

const char* approx_name(gelu_approx a) {
  return a == gelu_approx::tanh ? "tanh" : "none";
}

std::vector<std::int64_t> to_ints(const dim_list& d) {
  return {d.begin(), d.end()};
}

// A 0-d tensor holding `v` in `t`, for scalar first operands (broadcasts against anything).
tensor scalar_tensor(queue& q, double v, dtype t) {
  const float f = static_cast<float>(v);
  return tensor::from_floats(q, std::span<const float>(&f, 1), dims{}, t);
}

// The `other` operand of a binary op given as a scalar: an undefined tensor plus `scalar`.
attr_map scalar_attrs(double b) {
  return {{"scalar", b}};
}
attr_map scalar_attrs(double b, double alpha) {
  return {{"scalar", b}, {"alpha", alpha}};
}

}  // namespace

// ---- unary -----------------------------------------------------------------------------------
tensor neg(queue& q, const tensor& x) {
  static const op_handle op("neg");
  return op.run(q, {x});
}
tensor& neg_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("neg");
  return op.run_out(q, out, {x});
}
tensor abs(queue& q, const tensor& x) {
  static const op_handle op("abs");
  return op.run(q, {x});
}
tensor& abs_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("abs");
  return op.run_out(q, out, {x});
}
tensor exp(queue& q, const tensor& x) {
  static const op_handle op("exp");
  return op.run(q, {x});
}
tensor& exp_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("exp");
  return op.run_out(q, out, {x});
}
tensor log(queue& q, const tensor& x) {
  static const op_handle op("log");
  return op.run(q, {x});
}
tensor& log_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("log");
  return op.run_out(q, out, {x});
}
tensor sqrt(queue& q, const tensor& x) {
  static const op_handle op("sqrt");
  return op.run(q, {x});
}
tensor& sqrt_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("sqrt");
  return op.run_out(q, out, {x});
}
tensor rsqrt(queue& q, const tensor& x) {
  static const op_handle op("rsqrt");
  return op.run(q, {x});
}
tensor& rsqrt_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("rsqrt");
  return op.run_out(q, out, {x});
}
tensor sin(queue& q, const tensor& x) {
  static const op_handle op("sin");
  return op.run(q, {x});
}
tensor& sin_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("sin");
  return op.run_out(q, out, {x});
}
tensor cos(queue& q, const tensor& x) {
  static const op_handle op("cos");
  return op.run(q, {x});
}
tensor& cos_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("cos");
  return op.run_out(q, out, {x});
}
tensor tanh(queue& q, const tensor& x) {
  static const op_handle op("tanh");
  return op.run(q, {x});
}
tensor& tanh_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("tanh");
  return op.run_out(q, out, {x});
}
tensor sigmoid(queue& q, const tensor& x) {
  static const op_handle op("sigmoid");
  return op.run(q, {x});
}
tensor& sigmoid_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("sigmoid");
  return op.run_out(q, out, {x});
}
tensor relu(queue& q, const tensor& x) {
  static const op_handle op("relu");
  return op.run(q, {x});
}
tensor& relu_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("relu");
  return op.run_out(q, out, {x});
}
tensor silu(queue& q, const tensor& x) {
  static const op_handle op("silu");
  return op.run(q, {x});
}
tensor& silu_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("silu");
  return op.run_out(q, out, {x});
}
tensor gelu(queue& q, const tensor& x, gelu_approx approximate) {
  static const op_handle op("gelu");
  return op.run(q, {x}, {{"approximate", std::string(approx_name(approximate))}});
}
tensor& gelu_out(queue& q, tensor& out, const tensor& x, gelu_approx approximate) {
  static const op_handle op("gelu");
  return op.run_out(q, out, {x}, {{"approximate", std::string(approx_name(approximate))}});
}

// ---- binary ----------------------------------------------------------------------------------
// Tensor-tensor and tensor-scalar forms map onto the descriptor (`other` undefined + `scalar`);
// scalar-tensor forms pass the scalar as a 0-d tensor.
tensor add(queue& q, const tensor& a, const tensor& b, double alpha) {
  static const op_handle op("add");
  return op.run(q, {a, b}, {{"alpha", alpha}});
}
tensor add(queue& q, const tensor& a, double b, double alpha) {
  static const op_handle op("add");
  return op.run(q, {a, tensor()}, scalar_attrs(b, alpha));
}
tensor& add_out(queue& q, tensor& out, const tensor& a, const tensor& b, double alpha) {
  static const op_handle op("add");
  return op.run_out(q, out, {a, b}, {{"alpha", alpha}});
}
tensor& add_out(queue& q, tensor& out, const tensor& a, double b, double alpha) {
  static const op_handle op("add");
  return op.run_out(q, out, {a, tensor()}, scalar_attrs(b, alpha));
}
tensor sub(queue& q, const tensor& a, const tensor& b, double alpha) {
  static const op_handle op("sub");
  return op.run(q, {a, b}, {{"alpha", alpha}});
}
tensor sub(queue& q, const tensor& a, double b, double alpha) {
  static const op_handle op("sub");
  return op.run(q, {a, tensor()}, scalar_attrs(b, alpha));
}
tensor& sub_out(queue& q, tensor& out, const tensor& a, const tensor& b, double alpha) {
  static const op_handle op("sub");
  return op.run_out(q, out, {a, b}, {{"alpha", alpha}});
}
tensor& sub_out(queue& q, tensor& out, const tensor& a, double b, double alpha) {
  static const op_handle op("sub");
  return op.run_out(q, out, {a, tensor()}, scalar_attrs(b, alpha));
}
tensor mul(queue& q, const tensor& a, const tensor& b) {
  static const op_handle op("mul");
  return op.run(q, {a, b});
}
tensor mul(queue& q, const tensor& a, double b) {
  static const op_handle op("mul");
  return op.run(q, {a, tensor()}, scalar_attrs(b));
}
tensor& mul_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  static const op_handle op("mul");
  return op.run_out(q, out, {a, b});
}
tensor& mul_out(queue& q, tensor& out, const tensor& a, double b) {
  static const op_handle op("mul");
  return op.run_out(q, out, {a, tensor()}, scalar_attrs(b));
}
tensor div(queue& q, const tensor& a, const tensor& b) {
  static const op_handle op("div");
  return op.run(q, {a, b});
}
tensor div(queue& q, const tensor& a, double b) {
  static const op_handle op("div");
  return op.run(q, {a, tensor()}, scalar_attrs(b));
}
tensor& div_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  static const op_handle op("div");
  return op.run_out(q, out, {a, b});
}
tensor& div_out(queue& q, tensor& out, const tensor& a, double b) {
  static const op_handle op("div");
  return op.run_out(q, out, {a, tensor()}, scalar_attrs(b));
}
tensor maximum(queue& q, const tensor& a, const tensor& b) {
  static const op_handle op("maximum");
  return op.run(q, {a, b});
}
tensor maximum(queue& q, const tensor& a, double b) {
  static const op_handle op("maximum");
  return op.run(q, {a, tensor()}, scalar_attrs(b));
}
tensor& maximum_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  static const op_handle op("maximum");
  return op.run_out(q, out, {a, b});
}
tensor& maximum_out(queue& q, tensor& out, const tensor& a, double b) {
  static const op_handle op("maximum");
  return op.run_out(q, out, {a, tensor()}, scalar_attrs(b));
}
tensor minimum(queue& q, const tensor& a, const tensor& b) {
  static const op_handle op("minimum");
  return op.run(q, {a, b});
}
tensor minimum(queue& q, const tensor& a, double b) {
  static const op_handle op("minimum");
  return op.run(q, {a, tensor()}, scalar_attrs(b));
}
tensor& minimum_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  static const op_handle op("minimum");
  return op.run_out(q, out, {a, b});
}
tensor& minimum_out(queue& q, tensor& out, const tensor& a, double b) {
  static const op_handle op("minimum");
  return op.run_out(q, out, {a, tensor()}, scalar_attrs(b));
}
tensor pow(queue& q, const tensor& a, const tensor& b) {
  static const op_handle op("pow");
  return op.run(q, {a, b});
}
tensor pow(queue& q, const tensor& a, double b) {
  static const op_handle op("pow");
  return op.run(q, {a, tensor()}, scalar_attrs(b));
}
tensor& pow_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  static const op_handle op("pow");
  return op.run_out(q, out, {a, b});
}
tensor& pow_out(queue& q, tensor& out, const tensor& a, double b) {
  static const op_handle op("pow");
  return op.run_out(q, out, {a, tensor()}, scalar_attrs(b));
}

tensor sub(queue& q, double a, const tensor& b, double alpha) {
  return sub(q, scalar_tensor(q, a, b.type()), b, alpha);
}
tensor& sub_out(queue& q, tensor& out, double a, const tensor& b, double alpha) {
  return sub_out(q, out, scalar_tensor(q, a, b.type()), b, alpha);
}
tensor div(queue& q, double a, const tensor& b) {
  return div(q, scalar_tensor(q, a, b.type()), b);
}
tensor& div_out(queue& q, tensor& out, double a, const tensor& b) {
  return div_out(q, out, scalar_tensor(q, a, b.type()), b);
}
tensor pow(queue& q, double base, const tensor& exponent) {
  return pow(q, scalar_tensor(q, base, exponent.type()), exponent);
}
tensor& pow_out(queue& q, tensor& out, double base, const tensor& exponent) {
  return pow_out(q, out, scalar_tensor(q, base, exponent.type()), exponent);
}

// ---- reductions ------------------------------------------------------------------------------
tensor sum(queue& q, const tensor& x, const dim_list& dims, bool keepdim) {
  static const op_handle op("sum");
  return op.run(q, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}});
}
tensor& sum_out(queue& q, tensor& out, const tensor& x, const dim_list& dims, bool keepdim) {
  static const op_handle op("sum");
  return op.run_out(q, out, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}});
}
tensor mean(queue& q, const tensor& x, const dim_list& dims, bool keepdim) {
  static const op_handle op("mean");
  return op.run(q, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}});
}
tensor& mean_out(queue& q, tensor& out, const tensor& x, const dim_list& dims, bool keepdim) {
  static const op_handle op("mean");
  return op.run_out(q, out, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}});
}
tensor max(queue& q, const tensor& x, const dim_list& dims, bool keepdim) {
  static const op_handle op("max");
  return op.run(q, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}});
}
tensor& max_out(queue& q, tensor& out, const tensor& x, const dim_list& dims, bool keepdim) {
  static const op_handle op("max");
  return op.run_out(q, out, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}});
}
tensor min(queue& q, const tensor& x, const dim_list& dims, bool keepdim) {
  static const op_handle op("min");
  return op.run(q, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}});
}
tensor& min_out(queue& q, tensor& out, const tensor& x, const dim_list& dims, bool keepdim) {
  static const op_handle op("min");
  return op.run_out(q, out, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}});
}

namespace {
attr_map argmax_attrs(std::optional<int> dim, bool keepdim) {
  attr_map a{{"keepdim", keepdim}};
  if (dim) a["dims"] = std::vector<std::int64_t>{*dim};
  return a;
}
}  // namespace
tensor argmax(queue& q, const tensor& x, std::optional<int> dim, bool keepdim) {
  static const op_handle op("argmax");
  return op.run(q, {x}, argmax_attrs(dim, keepdim));
}
tensor& argmax_out(queue& q, tensor& out, const tensor& x, std::optional<int> dim, bool keepdim) {
  static const op_handle op("argmax");
  return op.run_out(q, out, {x}, argmax_attrs(dim, keepdim));
}

// ---- softmax ---------------------------------------------------------------------------------
tensor softmax(queue& q, const tensor& x, int dim) {
  static const op_handle op("softmax");
  return op.run(q, {x}, {{"dim", std::int64_t{dim}}});
}
tensor log_softmax(queue& q, const tensor& x, int dim) {
  static const op_handle op("log_softmax");
  return op.run(q, {x}, {{"dim", std::int64_t{dim}}});
}
tensor& softmax_out(queue& q, tensor& out, const tensor& x, int dim) {
  static const op_handle op("softmax");
  return op.run_out(q, out, {x}, {{"dim", std::int64_t{dim}}});
}
tensor& log_softmax_out(queue& q, tensor& out, const tensor& x, int dim) {
  static const op_handle op("log_softmax");
  return op.run_out(q, out, {x}, {{"dim", std::int64_t{dim}}});
}

// ---- norms -----------------------------------------------------------------------------------
tensor layer_norm(queue& q, const tensor& x, const tensor& weight, const tensor& bias, double eps) {
  static const op_handle op("layer_norm");
  return op.run(q, {x, weight, bias}, {{"eps", eps}});
}
tensor& layer_norm_out(queue& q, tensor& out, const tensor& x, const tensor& weight, const tensor& bias,
                       double eps) {
  static const op_handle op("layer_norm");
  return op.run_out(q, out, {x, weight, bias}, {{"eps", eps}});
}
tensor rms_norm(queue& q, const tensor& x, const tensor& weight, double eps) {
  static const op_handle op("rms_norm");
  return op.run(q, {x, weight}, {{"eps", eps}});
}
tensor& rms_norm_out(queue& q, tensor& out, const tensor& x, const tensor& weight, double eps) {
  static const op_handle op("rms_norm");
  return op.run_out(q, out, {x, weight}, {{"eps", eps}});
}
tensor& fused_add_rms_norm_out(queue& q, tensor& out, const tensor& x, tensor& residual, const tensor& weight,
                               double eps) {
  static const op_handle op("fused_add_rms_norm");
  op.run_into(q, {x, residual, weight}, {out, residual}, {{"eps", eps}});
  return out;
}
tensor fused_add_rms_norm(queue& q, const tensor& x, tensor& residual, const tensor& weight, double eps) {
  tensor out = tensor::empty(q, x.shape(), x.type());
  fused_add_rms_norm_out(q, out, x, residual, weight, eps);
  return out;
}
tensor& fused_add_layer_norm_out(queue& q, tensor& out, const tensor& x, tensor& residual,
                                 const tensor& weight, const tensor& bias, double eps) {
  static const op_handle op("fused_add_layer_norm");
  op.run_into(q, {x, residual, weight, bias}, {out, residual}, {{"eps", eps}});
  return out;
}
tensor fused_add_layer_norm(queue& q, const tensor& x, tensor& residual, const tensor& weight,
                            const tensor& bias, double eps) {
  tensor out = tensor::empty(q, x.shape(), x.type());
  fused_add_layer_norm_out(q, out, x, residual, weight, bias, eps);
  return out;
}
tensor l2_normalize(queue& q, const tensor& x, double eps) {
  static const op_handle op("l2_normalize");
  return op.run(q, {x}, {{"eps", eps}});
}
tensor& l2_normalize_out(queue& q, tensor& out, const tensor& x, double eps) {
  static const op_handle op("l2_normalize");
  return op.run_out(q, out, {x}, {{"eps", eps}});
}

// ---- pooling ---------------------------------------------------------------------------------
tensor masked_mean(queue& q, const tensor& x, const tensor& mask, double eps) {
  static const op_handle op("masked_mean");
  return op.run(q, {x, mask}, {{"eps", eps}});
}
tensor& masked_mean_out(queue& q, tensor& out, const tensor& x, const tensor& mask, double eps) {
  static const op_handle op("masked_mean");
  return op.run_out(q, out, {x, mask}, {{"eps", eps}});
}

// ---- rotary embedding ------------------------------------------------------------------------
// The descriptor (vLLM's form) rotates query [T, H, D] in place with positions [T] and one
// cos|sin cache [max_pos, rot]. Separate cos/sin caches that are the two halves of one tensor
// (cos = cache.slice(1, 0, rot/2), sin = cache.slice(1, rot/2, rot)) are used without a copy;
// others are concatenated on each call.
namespace {
tensor cos_sin_cache(queue& q, const tensor& cos_cache, const tensor& sin_cache) {
  if (cos_cache.dim() == 2 && sin_cache.dim() == 2 && cos_cache.same_storage(sin_cache) &&
      cos_cache.type() == sin_cache.type() && cos_cache.shape() == sin_cache.shape() &&
      cos_cache.strides() == sin_cache.strides() && cos_cache.strides()[1] == 1 &&
      sin_cache.offset() == cos_cache.offset() + cos_cache.size(1)) {
    dims shape{cos_cache.size(0), 2 * cos_cache.size(1)};
    return tensor(cos_cache.storage(), shape, cos_cache.strides(), cos_cache.offset(), cos_cache.type());
  }
  return cat(q, {cos_cache, sin_cache}, 1);
}

// Rotates `target` (a [T, H, D] view, or [B, S, H, D] with positions [B, S]) in place.
void rope_in_place(queue& q, tensor& target, const tensor& positions, const tensor& cache, rope_style style) {
  tensor view = target;
  tensor pos = positions;
  if (view.dim() == 4) {
    view = view.reshape({view.size(0) * view.size(1), view.size(2), view.size(3)});
    pos = pos.reshape({pos.numel()});
  }
  static const op_handle op("rotary_embedding");
  op.run_into(q, {pos, view, tensor(), cache}, {view, tensor()}, {{"is_neox", style == rope_style::neox}});
}
}  // namespace

tensor rotary_embedding(queue& q, const tensor& x, const tensor& positions, const tensor& cos_cache,
                        const tensor& sin_cache, rope_style style) {
  tensor out = tensor::empty(q, x.shape(), x.type());
  return rotary_embedding_out(q, out, x, positions, cos_cache, sin_cache, style);
}
tensor& rotary_embedding_out(queue& q, tensor& out, const tensor& x, const tensor& positions,
                             const tensor& cos_cache, const tensor& sin_cache, rope_style style) {
  const bool in_place = out.same_storage(x) && out.offset() == x.offset() && out.shape() == x.shape() &&
                        out.strides() == x.strides();
  if (!in_place) copy(q, out, x);
  rope_in_place(q, out, positions, cos_sin_cache(q, cos_cache, sin_cache), style);
  return out;
}
tensor& rotary_embedding_(queue& q, tensor& query, tensor& key, const tensor& positions,
                          const tensor& cos_sin_cache, rope_style style) {
  static const op_handle op("rotary_embedding");
  op.run_into(q, {positions, query, key, cos_sin_cache}, {query, key},
              {{"is_neox", style == rope_style::neox}});
  return query;
}

// ---- gated activations -----------------------------------------------------------------------
tensor silu_and_mul(queue& q, const tensor& x) {
  static const op_handle op("silu_and_mul");
  return op.run(q, {x});
}
tensor& silu_and_mul_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("silu_and_mul");
  return op.run_out(q, out, {x});
}
tensor linear_silu_and_mul(queue& q, const tensor& x, const tensor& weight) {
  static const op_handle op("linear_silu_and_mul");
  return op.run(q, {x, weight, tensor{}});
}
tensor linear_silu_and_mul(queue& q, const tensor& x, const tensor& weight, const tensor& norm_weight,
                           double eps) {
  static const op_handle op("linear_silu_and_mul");
  return op.run(q, {x, weight, norm_weight}, {{"eps", eps}});
}
tensor rms_norm_linear(queue& q, const tensor& x, const tensor& norm_weight, const tensor& weight,
                       const tensor& bias, double eps) {
  static const op_handle op("rms_norm_linear");
  return op.run(q, {x, norm_weight, weight, bias}, {{"eps", eps}});
}
tensor post_attention(queue& q, const tensor& residual, const tensor& attn, const tensor& o_weight,
                      const tensor& norm_weight, const tensor& gate_up_weight, const tensor& down_weight,
                      double eps) {
  static const op_handle op("post_attention");
  return op.run(q, {residual, attn, o_weight, norm_weight, gate_up_weight, down_weight}, {{"eps", eps}});
}
tensor& post_attention_out(queue& q, tensor& out, const tensor& residual, const tensor& attn,
                           const tensor& o_weight, const tensor& norm_weight, const tensor& gate_up_weight,
                           const tensor& down_weight, double eps) {
  static const op_handle op("post_attention");
  return op.run_out(q, out, {residual, attn, o_weight, norm_weight, gate_up_weight, down_weight},
                    {{"eps", eps}});
}
tensor gelu_and_mul(queue& q, const tensor& x, gelu_approx approximate) {
  static const op_handle op("gelu_and_mul");
  return op.run(q, {x}, {{"approximate", std::string(approx_name(approximate))}});
}
tensor& gelu_and_mul_out(queue& q, tensor& out, const tensor& x, gelu_approx approximate) {
  static const op_handle op("gelu_and_mul");
  return op.run_out(q, out, {x}, {{"approximate", std::string(approx_name(approximate))}});
}

// ---- KV cache --------------------------------------------------------------------------------
tensor qkv_rope_cache(queue& q, const tensor& qkv, const tensor& positions, const tensor& cos_sin_cache,
                      tensor& kv_cache, const tensor& q_norm, const tensor& k_norm, double eps,
                      rope_style style) {
  static const op_handle op("qkv_rope_cache");
  return op.run(q, {qkv, positions, cos_sin_cache, kv_cache, q_norm, k_norm},
                {{"eps", eps}, {"is_neox", style == rope_style::neox}});
}
tensor& qkv_rope_cache_out(queue& q, tensor& query, const tensor& qkv, const tensor& positions,
                           const tensor& cos_sin_cache, tensor& kv_cache, const tensor& q_norm,
                           const tensor& k_norm, double eps, rope_style style) {
  static const op_handle op("qkv_rope_cache");
  op.run_into(q, {qkv, positions, cos_sin_cache, kv_cache, q_norm, k_norm}, {query, kv_cache},
              {{"eps", eps}, {"is_neox", style == rope_style::neox}});
  return query;
}
tensor decode_attention(queue& q, const tensor& qkv, const tensor& positions, const tensor& cos_sin_cache,
                        tensor& kv_cache, const tensor& q_norm, const tensor& k_norm, double eps,
                        rope_style style, std::optional<double> scale) {
  static const op_handle op("decode_attention");
  return op.run(q, {qkv, positions, cos_sin_cache, kv_cache, q_norm, k_norm},
                {{"eps", eps}, {"is_neox", style == rope_style::neox}, {"scale", scale.value_or(0.0)}});
}
tensor kv_cache_attention(queue& q, const tensor& query, const tensor& kv_cache, const tensor& positions,
                          std::optional<double> scale) {
  static const op_handle op("kv_cache_attention");
  return op.run(q, {query, kv_cache, positions}, {{"scale", scale.value_or(0.0)}});
}
tensor& kv_cache_attention_out(queue& q, tensor& out, const tensor& query, const tensor& kv_cache,
                               const tensor& positions, std::optional<double> scale) {
  static const op_handle op("kv_cache_attention");
  return op.run_out(q, out, {query, kv_cache, positions}, {{"scale", scale.value_or(0.0)}});
}

// ---- indexing and layout ---------------------------------------------------------------------
tensor embedding(queue& q, const tensor& weight, const tensor& indices) {
  static const op_handle op("embedding");
  return op.run(q, {weight, indices});
}
tensor& embedding_out(queue& q, tensor& out, const tensor& weight, const tensor& indices) {
  static const op_handle op("embedding");
  return op.run_out(q, out, {weight, indices});
}
tensor cat(queue& q, const std::vector<tensor>& tensors, int dim) {
  static const op_handle op("cat");
  return op.run(q, tensors, {{"dim", std::int64_t{dim}}});
}
tensor& cat_out(queue& q, tensor& out, const std::vector<tensor>& tensors, int dim) {
  static const op_handle op("cat");
  return op.run_out(q, out, tensors, {{"dim", std::int64_t{dim}}});
}
tensor contiguous(queue& q, const tensor& x) {
  if (x.is_contiguous()) return x;
  static const op_handle op("copy");
  return op.run(q, {x});
}
tensor& copy(queue& q, tensor& dst, const tensor& src) {
  static const op_handle op("copy");
  return op.run_out(q, dst, {src});
}
tensor cast(queue& q, const tensor& x, dtype to) {
  static const op_handle op("cast");
  return op.run(q, {x}, {{"dtype", std::string(dtype_name(to))}});
}
tensor& cast_out(queue& q, tensor& out, const tensor& x) {
  static const op_handle op("cast");
  return op.run_out(q, out, {x}, {{"dtype", std::string(dtype_name(out.type()))}});
}
tensor& fill(queue& q, tensor& out, double value) {
  static const op_handle op("fill");
  return op.run_out(q, out, {}, {{"value", value}});
}
tensor zeros(queue& q, const dims& shape, dtype t) {
  static const op_handle op("zeros");
  return op.run(q, {}, {{"shape", shape.to_vector()}, {"dtype", std::string(dtype_name(t))}});
}
tensor full(queue& q, const dims& shape, double value, dtype t) {
  static const op_handle op("fill");
  return op.run(q, {},
                {{"shape", shape.to_vector()}, {"dtype", std::string(dtype_name(t))}, {"value", value}});
}
tensor arange(queue& q, double start, double end, double step, dtype t) {
  static const op_handle op("arange");
  return op.run(q, {},
                {{"start", start}, {"end", end}, {"step", step}, {"dtype", std::string(dtype_name(t))}});
}
tensor arange(queue& q, double end, dtype t) {
  return arange(q, 0.0, end, 1.0, t);
}
tensor& arange_out(queue& q, tensor& out, double start, double step) {
  const double end = start + step * static_cast<double>(out.numel());
  static const op_handle op("arange");
  return op.run_out(q, out, {},
                    {{"start", start},
                     {"end", end - step * 0.5},
                     {"step", step},
                     {"dtype", std::string(dtype_name(out.type()))}});
}

// ---- matmul family ---------------------------------------------------------------------------
tensor mm(queue& q, const tensor& a, const tensor& b) {
  static const op_handle op("mm");
  return op.run(q, {a, b});
}
tensor bmm(queue& q, const tensor& a, const tensor& b) {
  static const op_handle op("bmm");
  return op.run(q, {a, b});
}
tensor addmm(queue& q, const tensor& bias, const tensor& a, const tensor& b, double beta, double alpha) {
  static const op_handle op("addmm");
  return op.run(q, {bias, a, b}, {{"beta", beta}, {"alpha", alpha}});
}
namespace {
attr_map linear_attrs(linear_activation act) {
  const char* names[] = {"none", "gelu", "gelu_tanh", "silu"};
  return {{"activation", std::string(names[static_cast<int>(act)])}};
}
}  // namespace
tensor linear(queue& q, const tensor& x, const tensor& weight, const tensor& bias, linear_activation act) {
  static const op_handle op("linear");
  return op.run(q, {x, weight, bias}, linear_attrs(act));
}
tensor& mm_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  static const op_handle op("mm");
  return op.run_out(q, out, {a, b});
}
tensor& bmm_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  static const op_handle op("bmm");
  return op.run_out(q, out, {a, b});
}
tensor& addmm_out(queue& q, tensor& out, const tensor& bias, const tensor& a, const tensor& b, double beta,
                  double alpha) {
  static const op_handle op("addmm");
  return op.run_out(q, out, {bias, a, b}, {{"beta", beta}, {"alpha", alpha}});
}
tensor& linear_out(queue& q, tensor& out, const tensor& x, const tensor& weight, const tensor& bias,
                   linear_activation act) {
  static const op_handle op("linear");
  return op.run_out(q, out, {x, weight, bias}, linear_attrs(act));
}
tensor matmul(queue& q, const tensor& a, const tensor& b) {
  static const op_handle op("matmul");
  return op.run(q, {a, b});
}
tensor& matmul_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  static const op_handle op("matmul");
  return op.run_out(q, out, {a, b});
}

// ---- attention -------------------------------------------------------------------------------
namespace {
attr_map sdpa_attrs(bool is_causal, std::optional<double> scale) {
  return {{"is_causal", is_causal}, {"scale", scale.value_or(0.0)}};
}
}  // namespace
tensor scaled_dot_product_attention(queue& q, const tensor& query, const tensor& key, const tensor& value,
                                    const tensor& attn_mask, bool is_causal, std::optional<double> scale,
                                    const tensor& key_mask) {
  static const op_handle op("scaled_dot_product_attention");
  return op.run(q, {query, key, value, attn_mask, key_mask}, sdpa_attrs(is_causal, scale));
}
tensor& scaled_dot_product_attention_out(queue& q, tensor& out, const tensor& query, const tensor& key,
                                         const tensor& value, const tensor& attn_mask, bool is_causal,
                                         std::optional<double> scale, const tensor& key_mask) {
  static const op_handle op("scaled_dot_product_attention");
  return op.run_out(q, out, {query, key, value, attn_mask, key_mask}, sdpa_attrs(is_causal, scale));
}

}  // namespace prism::ops
