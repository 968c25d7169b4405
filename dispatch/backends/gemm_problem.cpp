// Reading BLAS operands from tensor views (see gemm_problem.hpp).
#include "dispatch/backends/gemm_problem.hpp"

#include <fmt/format.h>

#include "dispatch/backends/backend.hpp"

namespace prism::dispatch {

bool is_gemm_family(const std::string& op) {
  return op == "mm" || op == "bmm" || op == "addmm" || op == "linear";
}

namespace {

// The last two dims of `t` (rows x cols, strides rs/cs) as a BLAS operand.
std::optional<blas_operand> as_operand(const tensor& t, std::int64_t rows, std::int64_t cols, std::int64_t rs,
                                       std::int64_t cs) {
  blas_operand o;
  o.t = &t;
  o.offset = t.offset();
  if (cols == 1) cs = 1;
  if (rows == 1) rs = std::max<std::int64_t>(cols, 1);
  if (cs == 1 && rs >= std::max<std::int64_t>(cols, 1)) {
    o.trans = false;
    o.ld = rs;
    return o;
  }
  if (rows == 1 && cols > 1 && cs != 1) {
    // A single row with a non-unit stride is a column of the transposed layout.
    o.trans = true;
    o.ld = cs;
    return o;
  }
  if (rs == 1 && cs >= std::max<std::int64_t>(rows, 1)) {
    o.trans = true;
    o.ld = cs;
    return o;
  }
  return std::nullopt;
}

std::string layout(const tensor& t) {
  return t.shape().str() + " strides " + t.strides().str();
}

}  // namespace

std::variant<gemm_problem, std::string> make_gemm_problem(const op_call& call) {
  gemm_problem p;
  const tensor& out = call.outputs.at(0);
  p.type = out.type();
  for (const auto& t : call.inputs)
    if (t.defined() && t.type() != p.type)
      return fmt::format("mixed dtypes ({} and {})", dtype_name(t.type()), dtype_name(p.type));
  const tensor* a = nullptr;
  const tensor* b = nullptr;
  tensor a_flat;  // linear: x [..., in] seen as [M, in]
  if (call.op == "mm" || call.op == "bmm") {
    a = &call.inputs.at(0);
    b = &call.inputs.at(1);
  } else if (call.op == "addmm") {
    p.bias = &call.inputs.at(0);
    a = &call.inputs.at(1);
    b = &call.inputs.at(2);
    p.alpha = call.get_f64("alpha");
    p.beta = call.get_f64("beta");
  } else if (call.op == "linear") {
    a = &call.inputs.at(0);
    b = &call.inputs.at(1);
    if (call.inputs.size() > 2 && call.inputs[2].defined()) p.bias = &call.inputs[2];
    p.beta = 1.0;
  } else {
    return "not a GEMM family op";
  }
  if (!p.bias && call.op != "addmm") p.beta = 0.0;

  if (call.op == "bmm") {
    p.batch = a->size(0);
    p.m = a->size(1);
    p.k = a->size(2);
    p.n = b->size(2);
    auto oa = as_operand(*a, p.m, p.k, a->strides()[1], a->strides()[2]);
    auto ob = as_operand(*b, p.k, p.n, b->strides()[1], b->strides()[2]);
    auto oc = as_operand(out, p.m, p.n, out.strides()[1], out.strides()[2]);
    if (!oa) return "operand a " + layout(*a) + " has no unit stride in its last two dims";
    if (!ob) return "operand b " + layout(*b) + " has no unit stride in its last two dims";
    if (!oc || oc->trans) return "output " + layout(out) + " is not row-major";
    p.a = *oa;
    p.b = *ob;
    p.c = *oc;
    p.a.batch_stride = p.batch > 1 ? a->strides()[0] : 0;
    p.b.batch_stride = p.batch > 1 ? b->strides()[0] : 0;
    p.c.batch_stride = p.batch > 1 ? out.strides()[0] : 0;
    return p;
  }
  if (call.op == "linear") {
    // x [..., in] -> [M, in]: the leading dims must collapse into one stride.
    const int nd = a->dim();
    p.k = a->size(-1);
    p.n = b->size(0);
    p.m = nd == 1 ? 1 : a->numel() / std::max<std::int64_t>(p.k, 1);
    std::int64_t row_stride = nd == 1 ? p.k : a->strides()[nd - 2];
    for (int i = 0; i + 2 < nd; ++i)
      if (a->size(i) != 1 && a->strides()[i] != a->strides()[i + 1] * a->size(i + 1))
        return "input " + layout(*a) + " does not collapse to a matrix";
    auto oa = as_operand(*a, p.m, p.k, row_stride, a->strides()[nd - 1]);
    if (!oa || (nd > 2 && oa->trans)) return "input " + layout(*a) + " has no unit stride in its last dim";
    // weight [out, in] is used transposed: op(B) = weight^T, a [k, n] view with strides (s1, s0).
    auto ob = as_operand(*b, p.k, p.n, b->strides()[1], b->strides()[0]);
    if (!ob) return "weight " + layout(*b) + " has no unit stride";
    const int od = out.dim();
    std::int64_t out_rs = od == 1 ? p.n : out.strides()[od - 2];
    auto oc = as_operand(out, p.m, p.n, out_rs, out.strides()[od - 1]);
    if (!oc || oc->trans || !out.is_contiguous()) return "output " + layout(out) + " is not contiguous";
    p.a = *oa;
    p.b = *ob;
    p.c = *oc;
    return p;
  }
  // mm / addmm
  p.m = a->size(0);
  p.k = a->size(1);
  p.n = b->size(1);
  auto oa = as_operand(*a, p.m, p.k, a->strides()[0], a->strides()[1]);
  auto ob = as_operand(*b, p.k, p.n, b->strides()[0], b->strides()[1]);
  auto oc = as_operand(out, p.m, p.n, out.strides()[0], out.strides()[1]);
  if (!oa) return "operand a " + layout(*a) + " has no unit stride";
  if (!ob) return "operand b " + layout(*b) + " has no unit stride";
  if (!oc || oc->trans) return "output " + layout(out) + " is not row-major";
  p.a = *oa;
  p.b = *ob;
  p.c = *oc;
  return p;
}

}  // namespace prism::dispatch
