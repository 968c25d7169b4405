// The public op API (prism/ops.hpp): each function builds an op_call for its descriptor and hands
// it to the dispatcher. Composite forms (scalar first operands, matmul) are written here.
#include "prism/ops.hpp"

#include <cmath>

#include "dispatch/dispatcher.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/error.hpp"

namespace prism::ops {
namespace {

using dispatch::dispatch_call;

// The op's registry index, looked up once per call site.
#define PRISM_OP_INDEX(name)                           \
  [] {                                                 \
    static const int index = dispatch::op_index(name); \
    return index;                                      \
  }()

tensor run(queue& q, int op, const char* name, std::vector<tensor> inputs, attr_map attrs = {}) {
  op_call c;
  c.op = name;
  c.inputs = std::move(inputs);
  c.attrs = std::move(attrs);
  dispatch_call(q, op, c);
  return c.outputs[0];
}

tensor& run_out(queue& q, tensor& out, int op, const char* name, std::vector<tensor> inputs,
                attr_map attrs = {}) {
  op_call c;
  c.op = name;
  c.inputs = std::move(inputs);
  c.outputs = {out};
  c.attrs = std::move(attrs);
  dispatch_call(q, op, c);
  return out;
}

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

}  // namespace

// ---- unary -----------------------------------------------------------------------------------
#define PRISM_UNARY(fn)                                      \
  tensor fn(queue& q, const tensor& x) {                     \
    return run(q, PRISM_OP_INDEX(#fn), #fn, {x});            \
  }                                                          \
  tensor& fn##_out(queue& q, tensor& out, const tensor& x) { \
    return run_out(q, out, PRISM_OP_INDEX(#fn), #fn, {x});   \
  }
PRISM_UNARY(neg)
PRISM_UNARY(abs)
PRISM_UNARY(exp)
PRISM_UNARY(log)
PRISM_UNARY(sqrt)
PRISM_UNARY(rsqrt)
PRISM_UNARY(sin)
PRISM_UNARY(cos)
PRISM_UNARY(tanh)
PRISM_UNARY(sigmoid)
PRISM_UNARY(relu)
PRISM_UNARY(silu)
#undef PRISM_UNARY

tensor gelu(queue& q, const tensor& x, gelu_approx approximate) {
  return run(q, PRISM_OP_INDEX("gelu"), "gelu", {x},
             {{"approximate", std::string(approx_name(approximate))}});
}
tensor& gelu_out(queue& q, tensor& out, const tensor& x, gelu_approx approximate) {
  return run_out(q, out, PRISM_OP_INDEX("gelu"), "gelu", {x},
                 {{"approximate", std::string(approx_name(approximate))}});
}

// ---- binary ----------------------------------------------------------------------------------
// Tensor-tensor and tensor-scalar forms map onto the descriptor (`other` undefined + `scalar`);
// scalar-tensor forms pass the scalar as a 0-d tensor.
#define PRISM_BINARY(fn)                                                              \
  tensor fn(queue& q, const tensor& a, const tensor& b) {                             \
    return run(q, PRISM_OP_INDEX(#fn), #fn, {a, b});                                  \
  }                                                                                   \
  tensor fn(queue& q, const tensor& a, double b) {                                    \
    return run(q, PRISM_OP_INDEX(#fn), #fn, {a, tensor()}, {{"scalar", b}});          \
  }                                                                                   \
  tensor& fn##_out(queue& q, tensor& out, const tensor& a, const tensor& b) {         \
    return run_out(q, out, PRISM_OP_INDEX(#fn), #fn, {a, b});                         \
  }                                                                                   \
  tensor& fn##_out(queue& q, tensor& out, const tensor& a, double b) {                \
    return run_out(q, out, PRISM_OP_INDEX(#fn), #fn, {a, tensor()}, {{"scalar", b}}); \
  }
PRISM_BINARY(mul)
PRISM_BINARY(div)
PRISM_BINARY(maximum)
PRISM_BINARY(minimum)
PRISM_BINARY(pow)
#undef PRISM_BINARY

#define PRISM_BINARY_ALPHA(fn)                                                                          \
  tensor fn(queue& q, const tensor& a, const tensor& b, double alpha) {                                 \
    return run(q, PRISM_OP_INDEX(#fn), #fn, {a, b}, {{"alpha", alpha}});                                \
  }                                                                                                     \
  tensor fn(queue& q, const tensor& a, double b, double alpha) {                                        \
    return run(q, PRISM_OP_INDEX(#fn), #fn, {a, tensor()}, {{"scalar", b}, {"alpha", alpha}});          \
  }                                                                                                     \
  tensor& fn##_out(queue& q, tensor& out, const tensor& a, const tensor& b, double alpha) {             \
    return run_out(q, out, PRISM_OP_INDEX(#fn), #fn, {a, b}, {{"alpha", alpha}});                       \
  }                                                                                                     \
  tensor& fn##_out(queue& q, tensor& out, const tensor& a, double b, double alpha) {                    \
    return run_out(q, out, PRISM_OP_INDEX(#fn), #fn, {a, tensor()}, {{"scalar", b}, {"alpha", alpha}}); \
  }
PRISM_BINARY_ALPHA(add)
PRISM_BINARY_ALPHA(sub)
#undef PRISM_BINARY_ALPHA

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
#define PRISM_REDUCE(fn)                                                                                    \
  tensor fn(queue& q, const tensor& x, const dim_list& dims, bool keepdim) {                                \
    return run(q, PRISM_OP_INDEX(#fn), #fn, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}});          \
  }                                                                                                         \
  tensor& fn##_out(queue& q, tensor& out, const tensor& x, const dim_list& dims, bool keepdim) {            \
    return run_out(q, out, PRISM_OP_INDEX(#fn), #fn, {x}, {{"dims", to_ints(dims)}, {"keepdim", keepdim}}); \
  }
PRISM_REDUCE(sum)
PRISM_REDUCE(mean)
PRISM_REDUCE(max)
PRISM_REDUCE(min)
#undef PRISM_REDUCE

namespace {
attr_map argmax_attrs(std::optional<int> dim, bool keepdim) {
  attr_map a{{"keepdim", keepdim}};
  if (dim) a["dims"] = std::vector<std::int64_t>{*dim};
  return a;
}
}  // namespace
tensor argmax(queue& q, const tensor& x, std::optional<int> dim, bool keepdim) {
  return run(q, PRISM_OP_INDEX("argmax"), "argmax", {x}, argmax_attrs(dim, keepdim));
}
tensor& argmax_out(queue& q, tensor& out, const tensor& x, std::optional<int> dim, bool keepdim) {
  return run_out(q, out, PRISM_OP_INDEX("argmax"), "argmax", {x}, argmax_attrs(dim, keepdim));
}

// ---- softmax ---------------------------------------------------------------------------------
tensor softmax(queue& q, const tensor& x, int dim) {
  return run(q, PRISM_OP_INDEX("softmax"), "softmax", {x}, {{"dim", std::int64_t{dim}}});
}
tensor log_softmax(queue& q, const tensor& x, int dim) {
  return run(q, PRISM_OP_INDEX("log_softmax"), "log_softmax", {x}, {{"dim", std::int64_t{dim}}});
}
tensor& softmax_out(queue& q, tensor& out, const tensor& x, int dim) {
  return run_out(q, out, PRISM_OP_INDEX("softmax"), "softmax", {x}, {{"dim", std::int64_t{dim}}});
}
tensor& log_softmax_out(queue& q, tensor& out, const tensor& x, int dim) {
  return run_out(q, out, PRISM_OP_INDEX("log_softmax"), "log_softmax", {x}, {{"dim", std::int64_t{dim}}});
}

// ---- norms -----------------------------------------------------------------------------------
tensor layer_norm(queue& q, const tensor& x, const tensor& weight, const tensor& bias, double eps) {
  return run(q, PRISM_OP_INDEX("layer_norm"), "layer_norm", {x, weight, bias}, {{"eps", eps}});
}
tensor& layer_norm_out(queue& q, tensor& out, const tensor& x, const tensor& weight, const tensor& bias,
                       double eps) {
  return run_out(q, out, PRISM_OP_INDEX("layer_norm"), "layer_norm", {x, weight, bias}, {{"eps", eps}});
}
tensor rms_norm(queue& q, const tensor& x, const tensor& weight, double eps) {
  return run(q, PRISM_OP_INDEX("rms_norm"), "rms_norm", {x, weight}, {{"eps", eps}});
}
tensor& rms_norm_out(queue& q, tensor& out, const tensor& x, const tensor& weight, double eps) {
  return run_out(q, out, PRISM_OP_INDEX("rms_norm"), "rms_norm", {x, weight}, {{"eps", eps}});
}
tensor& fused_add_rms_norm_out(queue& q, tensor& out, const tensor& x, tensor& residual, const tensor& weight,
                               double eps) {
  op_call c;
  c.op = "fused_add_rms_norm";
  c.inputs = {x, residual, weight};
  c.outputs = {out, residual};
  c.attrs = {{"eps", eps}};
  dispatch_call(q, PRISM_OP_INDEX("fused_add_rms_norm"), c);
  return out;
}
tensor fused_add_rms_norm(queue& q, const tensor& x, tensor& residual, const tensor& weight, double eps) {
  tensor out = tensor::empty(q, x.shape(), x.type());
  fused_add_rms_norm_out(q, out, x, residual, weight, eps);
  return out;
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
  op_call c;
  c.op = "rotary_embedding";
  c.inputs = {pos, view, tensor(), cache};
  c.outputs = {view, tensor()};
  c.attrs = {{"is_neox", style == rope_style::neox}};
  dispatch_call(q, PRISM_OP_INDEX("rotary_embedding"), c);
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
  op_call c;
  c.op = "rotary_embedding";
  c.inputs = {positions, query, key, cos_sin_cache};
  c.outputs = {query, key};
  c.attrs = {{"is_neox", style == rope_style::neox}};
  dispatch_call(q, PRISM_OP_INDEX("rotary_embedding"), c);
  return query;
}

// ---- gated activations -----------------------------------------------------------------------
tensor silu_and_mul(queue& q, const tensor& x) {
  return run(q, PRISM_OP_INDEX("silu_and_mul"), "silu_and_mul", {x});
}
tensor& silu_and_mul_out(queue& q, tensor& out, const tensor& x) {
  return run_out(q, out, PRISM_OP_INDEX("silu_and_mul"), "silu_and_mul", {x});
}
tensor gelu_and_mul(queue& q, const tensor& x, gelu_approx approximate) {
  return run(q, PRISM_OP_INDEX("gelu_and_mul"), "gelu_and_mul", {x},
             {{"approximate", std::string(approx_name(approximate))}});
}
tensor& gelu_and_mul_out(queue& q, tensor& out, const tensor& x, gelu_approx approximate) {
  return run_out(q, out, PRISM_OP_INDEX("gelu_and_mul"), "gelu_and_mul", {x},
                 {{"approximate", std::string(approx_name(approximate))}});
}

// ---- indexing and layout ---------------------------------------------------------------------
tensor embedding(queue& q, const tensor& weight, const tensor& indices) {
  return run(q, PRISM_OP_INDEX("embedding"), "embedding", {weight, indices});
}
tensor& embedding_out(queue& q, tensor& out, const tensor& weight, const tensor& indices) {
  return run_out(q, out, PRISM_OP_INDEX("embedding"), "embedding", {weight, indices});
}
tensor cat(queue& q, const std::vector<tensor>& tensors, int dim) {
  return run(q, PRISM_OP_INDEX("cat"), "cat", tensors, {{"dim", std::int64_t{dim}}});
}
tensor& cat_out(queue& q, tensor& out, const std::vector<tensor>& tensors, int dim) {
  return run_out(q, out, PRISM_OP_INDEX("cat"), "cat", tensors, {{"dim", std::int64_t{dim}}});
}
tensor contiguous(queue& q, const tensor& x) {
  if (x.is_contiguous()) return x;
  return run(q, PRISM_OP_INDEX("copy"), "copy", {x});
}
tensor& copy(queue& q, tensor& dst, const tensor& src) {
  return run_out(q, dst, PRISM_OP_INDEX("copy"), "copy", {src});
}
tensor cast(queue& q, const tensor& x, dtype to) {
  return run(q, PRISM_OP_INDEX("cast"), "cast", {x}, {{"dtype", std::string(dtype_name(to))}});
}
tensor& cast_out(queue& q, tensor& out, const tensor& x) {
  return run_out(q, out, PRISM_OP_INDEX("cast"), "cast", {x},
                 {{"dtype", std::string(dtype_name(out.type()))}});
}
tensor& fill(queue& q, tensor& out, double value) {
  return run_out(q, out, PRISM_OP_INDEX("fill"), "fill", {}, {{"value", value}});
}
tensor zeros(queue& q, const dims& shape, dtype t) {
  return run(q, PRISM_OP_INDEX("zeros"), "zeros", {},
             {{"shape", shape.to_vector()}, {"dtype", std::string(dtype_name(t))}});
}
tensor full(queue& q, const dims& shape, double value, dtype t) {
  return run(q, PRISM_OP_INDEX("fill"), "fill", {},
             {{"shape", shape.to_vector()}, {"dtype", std::string(dtype_name(t))}, {"value", value}});
}
tensor arange(queue& q, double start, double end, double step, dtype t) {
  return run(q, PRISM_OP_INDEX("arange"), "arange", {},
             {{"start", start}, {"end", end}, {"step", step}, {"dtype", std::string(dtype_name(t))}});
}
tensor arange(queue& q, double end, dtype t) {
  return arange(q, 0.0, end, 1.0, t);
}
tensor& arange_out(queue& q, tensor& out, double start, double step) {
  const double end = start + step * static_cast<double>(out.numel());
  return run_out(q, out, PRISM_OP_INDEX("arange"), "arange", {},
                 {{"start", start},
                  {"end", end - step * 0.5},
                  {"step", step},
                  {"dtype", std::string(dtype_name(out.type()))}});
}

// ---- matmul family ---------------------------------------------------------------------------
tensor mm(queue& q, const tensor& a, const tensor& b) {
  return run(q, PRISM_OP_INDEX("mm"), "mm", {a, b});
}
tensor bmm(queue& q, const tensor& a, const tensor& b) {
  return run(q, PRISM_OP_INDEX("bmm"), "bmm", {a, b});
}
tensor addmm(queue& q, const tensor& bias, const tensor& a, const tensor& b, double beta, double alpha) {
  return run(q, PRISM_OP_INDEX("addmm"), "addmm", {bias, a, b}, {{"beta", beta}, {"alpha", alpha}});
}
tensor linear(queue& q, const tensor& x, const tensor& weight, const tensor& bias) {
  return run(q, PRISM_OP_INDEX("linear"), "linear", {x, weight, bias});
}
tensor& mm_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  return run_out(q, out, PRISM_OP_INDEX("mm"), "mm", {a, b});
}
tensor& bmm_out(queue& q, tensor& out, const tensor& a, const tensor& b) {
  return run_out(q, out, PRISM_OP_INDEX("bmm"), "bmm", {a, b});
}
tensor& addmm_out(queue& q, tensor& out, const tensor& bias, const tensor& a, const tensor& b, double beta,
                  double alpha) {
  return run_out(q, out, PRISM_OP_INDEX("addmm"), "addmm", {bias, a, b}, {{"beta", beta}, {"alpha", alpha}});
}
tensor& linear_out(queue& q, tensor& out, const tensor& x, const tensor& weight, const tensor& bias) {
  return run_out(q, out, PRISM_OP_INDEX("linear"), "linear", {x, weight, bias});
}
tensor matmul(queue& q, const tensor& a, const tensor& b) {
  if (a.dim() == 2 && b.dim() == 2) return mm(q, a, b);
  if (a.dim() == 3 && b.dim() == 3) return bmm(q, a, b);
  if (a.dim() >= 1 && b.dim() == 2) return linear(q, a, b.transpose(0, 1));
  throw error(errc::invalid_argument, "ops::matmul",
              "supports 2-D x 2-D (mm), 3-D x 3-D (bmm) and N-D x 2-D (over the leading dims); got " +
                  a.shape().str() + " x " + b.shape().str());
}

// ---- attention -------------------------------------------------------------------------------
namespace {
attr_map sdpa_attrs(bool is_causal, std::optional<double> scale) {
  return {{"is_causal", is_causal}, {"scale", scale.value_or(0.0)}};
}
}  // namespace
tensor scaled_dot_product_attention(queue& q, const tensor& query, const tensor& key, const tensor& value,
                                    const tensor& attn_mask, bool is_causal, std::optional<double> scale) {
  return run(q, PRISM_OP_INDEX("scaled_dot_product_attention"), "scaled_dot_product_attention",
             {query, key, value, attn_mask}, sdpa_attrs(is_causal, scale));
}
tensor& scaled_dot_product_attention_out(queue& q, tensor& out, const tensor& query, const tensor& key,
                                         const tensor& value, const tensor& attn_mask, bool is_causal,
                                         std::optional<double> scale) {
  return run_out(q, out, PRISM_OP_INDEX("scaled_dot_product_attention"), "scaled_dot_product_attention",
                 {query, key, value, attn_mask}, sdpa_attrs(is_causal, scale));
}

}  // namespace prism::ops
