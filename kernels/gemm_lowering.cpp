// SPDX-License-Identifier: Apache-2.0
// BLAS views and shape keys of a lowered GEMM (see gemm_lowering.hpp).
#include "kernels/gemm_lowering.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "prism/error.hpp"

namespace prism {
namespace {

// The (rows x cols) matrix at strides (rs, cs) as a BLAS operand, when one of them is unit.
std::optional<blas_operand> as_operand(std::int64_t offset, std::int64_t rows, std::int64_t cols,
                                       std::int64_t rs, std::int64_t cs) {
  blas_operand o;
  o.offset = offset;
  if (cols == 1) cs = 1;
  if (rows == 1) rs = std::max<std::int64_t>(cols, 1);
  if (cs == 1 && rs >= std::max<std::int64_t>(cols, 1)) {
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

std::string layout(const char* what, const tensor& t) {
  return std::string(what) + " " + t.shape().str() + " strides " + t.strides().str();
}

}  // namespace

const char* gemm_activation_name(gemm_activation a) noexcept {
  switch (a) {
    case gemm_activation::none:
      return "none";
    case gemm_activation::gelu:
      return "gelu";
    case gemm_activation::gelu_tanh:
      return "gelu_tanh";
    case gemm_activation::silu:
      return "silu";
  }
  return "?";
}

gemm_activation parse_gemm_activation(std::string_view name, const char* operation) {
  for (auto a :
       {gemm_activation::none, gemm_activation::gelu, gemm_activation::gelu_tanh, gemm_activation::silu})
    if (name == gemm_activation_name(a)) return a;
  throw error(errc::invalid_argument, operation,
              "attribute 'activation' is '" + std::string(name) +
                  "'; valid: none, gelu (erf), gelu_tanh (tanh approximation), silu");
}

double apply_gemm_activation(gemm_activation a, double x) noexcept {
  switch (a) {
    case gemm_activation::gelu:
      return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case gemm_activation::gelu_tanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case gemm_activation::silu:
      return x / (1.0 + std::exp(-x));
    case gemm_activation::none:
      break;
  }
  return x;
}

std::variant<blas_layout, std::string> blas_layout_of(const gemm_problem& p) {
  if (p.activation != gemm_activation::none)
    return std::string("the ") + gemm_activation_name(p.activation) +
           " activation epilogue is not a BLAS operation";
  if (!p.a_folds) return layout("input", p.a) + " does not fold its leading dims into one row stride";
  if (is_quantized(p.b.type()))
    return layout("operand b", p.b) + " is block-quantized; BLAS libraries read only float operands";
  auto a = as_operand(p.a.offset(), p.m, p.k, p.sam, p.sak);
  auto b = as_operand(p.b.offset(), p.k, p.n, p.sbk, p.sbn);
  auto c = as_operand(p.c.offset(), p.m, p.n, p.scm, p.scn);
  if (!a) return layout("operand a", p.a) + " has no unit stride in its matrix dims";
  if (!b) return layout("operand b", p.b) + " has no unit stride in its matrix dims";
  if (!c || c->trans) return layout("output", p.c) + " is not row-major";
  a->batch_stride = p.batch > 1 ? p.sab : 0;
  b->batch_stride = p.batch > 1 ? p.sbb : 0;
  c->batch_stride = p.batch > 1 ? p.scb : 0;
  return blas_layout{*a, *b, *c};
}

shape_key gemm_key(const gemm_problem& p, bool with_batch, bool with_layout) {
  shape_key key;
  if (with_batch) key.set("b", p.batch);
  key.set("m", p.m);
  key.set("n", p.n);
  key.set("k", p.k);
  if (with_layout) {
    key.set("ta", p.k > 1 && p.sak != 1 ? 1 : 0);
    key.set("tb", p.n > 1 && p.sbn != 1 ? 1 : 0);
  }
  return key;
}

double gemm_flops(const gemm_problem& p) {
  return 2.0 * static_cast<double>(p.batch * p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
}

}  // namespace prism
