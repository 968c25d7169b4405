// SPDX-License-Identifier: Apache-2.0
// BLAS views, shape keys and the GPU FP32 tile choice of a lowered GEMM (see gemm_lowering.hpp).
#include "kernels/gemm_lowering.hpp"

#include <algorithm>
#include <bit>
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

// H200, pipelined, against the tiled route: f32 M = 32 [4096, 1024] 18.3 against 30.2 us, [1024,
// 3072] 17.4 against 39.5, [4096, 4096] 62.6 against 72.0, but [11008, 4096] 204.7 against 160.0;
// M = 48 [4096, 1024] 24.8 against 31.6, [4096, 4096] 91.7 against 74.1; M = 64 [1024, 3072] 22.6
// against 40.9, [6144, 1024] 44.0 against 38.2; bf16 M = 32 [1024, 3072] 14.9 against 24.5 at mb=16,
// nb=2 (the other qwen3-0.6b shapes kept the tensor-core tiles in pretune); bf16 M = 1 [151936,
// 1024] 79.7 against 110.5 at nb=4, warps=4.
std::optional<gemm_skinny_shape> nv_skinny_shape(std::int64_t m, std::int64_t n, std::int64_t k, bool f32) {
  if (m == 1) return f32 || n < 65536 ? gemm_skinny_shape{1, 1, 8} : gemm_skinny_shape{1, 4, 4};
  if (m <= 16)
    return gemm_skinny_shape{std::min<std::int64_t>(8, std::bit_ceil(static_cast<std::uint64_t>(m))), 8, 4};
  if (!f32) {
    if (m <= 32 && n <= 2048 && k >= 3072) return gemm_skinny_shape{16, 2, 4};
    return std::nullopt;
  }
  if ((m <= 32 && n <= 8192) || (m <= 48 && n * k <= (std::int64_t{8} << 20)) || (m <= 64 && n <= 2048))
    return gemm_skinny_shape{8, 8, 4};
  return std::nullopt;
}

gemm_gpu_tile fp32_gpu_tile(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                            std::int64_t compute_units) {
  const std::int64_t cus = std::max<std::int64_t>(compute_units, 1);
  auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  auto groups = [&](std::int64_t bm, std::int64_t bn) { return ceil_div(m, bm) * ceil_div(n, bn) * batch; };
  // A grid of g groups takes ceil(g / cus) waves (one 256-item group per unit); busy() is the
  // share of those waves' slots that hold a group. A grid fills the device with two waves or more,
  // or one to two that are >= 80% busy.
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
  // Measured on an H200 (RESULTS.md, "Issue 13, session 32"), device time against cuBLAS FP32 in
  // the same call, us:
  // 1. 128x256 tiles on 16-deep swizzled slices where their waves are >= 95% busy: 4096^3 3020
  //    (256x128, 8-deep: 3097-3106; cuBLAS 2767-2858), 8192^3 23514 (24468; 21614-21727),
  //    2048^3 391 (398; 377).
  // 2. 256x128 stream-K (one group a unit) where at least 3/4 of the tiles' rows hold rows of C and
  //    the tiles number at least a third of the units (each shared by about 3 groups at most):
  //    1024x11008x4096 2085 (unsplit 2317-2323; cuBLAS 2079-2090), 512x11008x4096 1054 (split 3
  //    1103; 967-997), 256x11008x4096 538 (split 3 557; 568), 512x4096x4096 406 (split 2 420;
  //    430), 2048x1024x3072 305 (split 2 319; 291).
  //    Fewer 256x128 tiles: split K where the split grid fills the device (256x4096x4096: split 4
  //    222.5, 64x128 276.6; 212.3; session 31).
  // 3. 64x128 tiles unsplit where they fill the device (1024^3: 75.6 against 86.0).
  // 4. M <= 64: 64x128 stream-K on two groups a unit: 64x4096x4096 75 (unsplit 270; 81.6).
  // 5. M ~ 128: 128x256 stream-K where each tile is shared by <= 4 groups, 128x11008x4096 278
  //    (split 3 286-289; 264-273); else split K on 16-deep swizzled slices, 128x4096x11008 split
  //    8 278-280 (8-deep 285; stream-K 285-287; 262).
  const std::int64_t g_wide = groups(128, 256);
  if (g_wide * 10 >= cus * 9 && busy(g_wide) >= 0.95) return {128, 256, 16, 1, 0, true};
  const std::int64_t g_tall = groups(256, 128);
  if (m * 4 >= ceil_div(m, 256) * 256 * 3) {
    if (g_tall * 3 >= cus) return {256, 128, 8, 1, 1, false};
    const std::int64_t sk = best_split(g_tall);
    if (fills(g_tall * sk)) return {256, 128, 8, sk, 0, false};
  }
  if (fills(groups(64, 128))) return {64, 128, 16, 1, 0, false};
  if (m <= 64) return {64, 128, 16, 1, 2, false};
  if (g_wide * 4 >= cus) return {128, 256, 8, 1, 1, false};
  return {128, 256, 16, best_split(g_wide), 0, true};
}

gemm_streamk_grid streamk_grid(std::int64_t tiles, std::int64_t iters_per_tile, std::int64_t groups) {
  const std::int64_t p = std::max<std::int64_t>(groups, 1);
  if (tiles <= 0) return {0, 0};
  if (tiles >= p) {
    if (tiles % p == 0) return {tiles, 0};
    return {tiles < 2 * p ? 0 : tiles - tiles % p - p, p};
  }
  return {0, std::min({p, tiles * 8, tiles * std::max<std::int64_t>(iters_per_tile, 1)})};
}

}  // namespace prism
