// SPDX-License-Identifier: Apache-2.0
// BLAS views, shape keys and the GPU FP32 tile choice of a lowered GEMM (see gemm_lowering.hpp).
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

gemm_gpu_tile fp32_gpu_tile(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                            std::int64_t compute_units) {
  const std::int64_t cus = std::max<std::int64_t>(compute_units, 1);
  auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  auto groups = [&](std::int64_t bm, std::int64_t bn) { return ceil_div(m, bm) * ceil_div(n, bn) * batch; };
  // A grid of g groups takes ceil(g / cus) waves (one 256x128 group per unit); busy() is the share
  // of those waves' slots that hold a group. A grid fills the device with two waves or more, or
  // one to two that are >= 80% busy.
  auto busy = [&](std::int64_t g) {
    return static_cast<double>(g) / static_cast<double>(ceil_div(g, cus) * cus);
  };
  auto fills = [&](std::int64_t g) { return g * 10 >= cus * 9 && (g >= 2 * cus || busy(g) >= 0.8); };
  // The K split (up to 8, each split at least 512 deep) whose waves are busiest, the fewest on a tie.
  auto best_split = [&](std::int64_t g) {
    std::int64_t sk = 1;
    for (std::int64_t s = 2; s <= 8 && k / s >= 512; ++s)
      if (busy(g * s) > busy(g * sk) + 0.01) sk = s;
    return sk;
  };
  // In order: 256x128 tiles (at least 3/4 of their rows in C), unsplit if that fills the device,
  // else split K as best_split says; 64x128 tiles unsplit; 128x256 tiles with K split (M ~ 128).
  // Measured on an H200 (RESULTS.md, "Issue 13, session 31"), against cuBLAS FP32 in the same
  // call: 128x11008x4096 64x128 (172 groups, 1.3 waves) 461-468 us, 128x256 split 3 (129 groups)
  // 288-290 (cuBLAS 260-276); 256x11008x4096 64x128 647, 256x128 split 3 558 (533); 512x4096x4096
  // 64x128 469, 256x128 split 2 421 (377); 2048x1024x3072 64x128 344, 256x128 split 2 321 (282).
  // 128x128 tiles lost or tied at every shape measured and are no longer a candidate.
  if (m * 4 >= ceil_div(m, 256) * 256 * 3) {
    const std::int64_t g = groups(256, 128), sk = fills(g) ? 1 : best_split(g);
    if (fills(g * sk)) return {256, 128, sk};
  }
  if (fills(groups(64, 128))) return {64, 128, 1};
  return {128, 256, best_split(groups(128, 256))};
}

}  // namespace prism
