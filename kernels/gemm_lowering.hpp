// SPDX-License-Identifier: Apache-2.0
// The one GEMM lowering of the matmul family. Each GEMM-family descriptor (mm, bmm, addmm,
// linear, matmul) lowers its call to a gemm_problem through op_descriptor::gemm; prism's GEMM
// kernels read the element strides directly, and BLAS libraries (CLBlast, OpenBLAS) read
// blas_layout_of(). Nothing downstream looks at the op's name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "prism/dtype.hpp"
#include "prism/shape_key.hpp"
#include "prism/tensor.hpp"

namespace prism {

/// The activation a GEMM's store epilogue applies after the bias (linear's `activation`).
enum class gemm_activation : std::uint8_t { none = 0, gelu = 1, gelu_tanh = 2, silu = 3 };
/// "none", "gelu", "gelu_tanh", "silu".
const char* gemm_activation_name(gemm_activation a) noexcept;
/// Parses those names; throws errc::invalid_argument from `operation` listing the valid ones.
gemm_activation parse_gemm_activation(std::string_view name, const char* operation);
/// The activation in double (host references): GELU with erf or its tanh form, SiLU.
double apply_gemm_activation(gemm_activation a, double x) noexcept;

/// C[b](m, n) = act(alpha * sum_k A[b](m, k) * B[b](k, n) + beta * X(m, n)), every operand read
/// through element strides (transposed and broadcast views cost no copy). X, the bias, is
/// broadcast over [m, n] by (sxm, sxn) and shared by every batch; beta is 0 without one.
struct gemm_problem {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  tensor a, b, c, bias;  ///< bias undefined when absent
  std::int64_t sab = 0, sam = 0, sak = 0;
  std::int64_t sbb = 0, sbk = 0, sbn = 0;
  std::int64_t scb = 0, scm = 0, scn = 1;
  std::int64_t sxm = 0, sxn = 0;
  double alpha = 1.0, beta = 0.0;
  /// Applied to each element after alpha and the bias; BLAS libraries cannot (blas_layout_of).
  gemm_activation activation = gemm_activation::none;
  /// False when A's leading dims do not fold into one row stride (linear or matmul over a
  /// sliced N-D view): prism's kernels then read a contiguous copy, BLAS libraries refuse.
  bool a_folds = true;
  dtype type = dtype::f32;
};

/// One operand as BLAS sees it: row-major, op(X) = X or X^T.
struct blas_operand {
  bool trans = false;       ///< the memory holds op(X)^T row-major
  std::int64_t ld = 0;      ///< leading dimension (elements)
  std::int64_t offset = 0;  ///< first element
  std::int64_t batch_stride = 0;
};

struct blas_layout {
  blas_operand a, b, c;
};

/// The problem's operands as BLAS takes them, or why a BLAS library cannot (an operand with no
/// unit stride, an output that is not row-major, A that does not fold, an activation epilogue).
std::variant<blas_layout, std::string> blas_layout_of(const gemm_problem& p);

/// The GEMM-family shape key: [b,] m, n, k [, ta, tb] (ta/tb: A not k-contiguous, B not
/// n-contiguous, the layouts that change which kernel form runs).
shape_key gemm_key(const gemm_problem& p, bool with_batch, bool with_layout);

/// 2 * batch * m * n * k.
double gemm_flops(const gemm_problem& p);

/// A GPU FP32 register tile: rows and columns of C a work-group and the k-slice depth, how many
/// ways K is split (a workspace, then a reduction), stream-K (`streamk` groups per compute unit
/// share the grid's last tiles' k-iterations; 0: off) and whether the local slices are unpadded and
/// swizzled (what lets a 16-deep slice of a 128x256 tile fit 48 KB).
struct gemm_gpu_tile {
  std::int64_t bm = 0, bn = 0, bk = 0, splits = 1, streamk = 0;
  bool swizzled = false;
  bool operator==(const gemm_gpu_tile&) const = default;
};

/// The tile NVIDIA's FP32 auto choice (variant 3, auto=1) takes for a batch of m x n x k GEMMs on
/// `compute_units` units, by how busy the grid's waves keep them: 128x256 with 16-deep swizzled
/// slices where its waves are full, else 256x128 stream-K, 64x128, stream-K or split-K for M ~ 64
/// and ~128.
gemm_gpu_tile fp32_gpu_tile(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch,
                            std::int64_t compute_units);

/// NVIDIA auto's small-M kernel (gemm_nv_skinny: mb activation rows a group, nb weight rows a
/// warp, `warps` warps), or none for the tiled GEMMs. Up to 16 rows always; past 16 only where the
/// weight is small enough that the kernel's passes over it (one every mb rows) stay in L2 while
/// the tiles leave most compute units idle (f32 up to 64 rows, 16-bit up to 32); at M = 1,
/// 16-bit heads of 64k rows and more take four rows a warp. Measured on the H200:
/// benchmarks/RESULTS.md, "Session 55".
struct gemm_skinny_shape {
  std::int64_t mb = 1, nb = 1, warps = 8;
  bool operator==(const gemm_skinny_shape&) const = default;
};
std::optional<gemm_skinny_shape> nv_skinny_shape(std::int64_t m, std::int64_t n, std::int64_t k, bool f32);

/// A stream-K grid (gemm_nv.cl, STREAMK=1) over `tiles` tiles of `iters_per_tile` k-iterations:
/// the first `whole` groups compute a tile each; the last `shared` groups split the remaining
/// tiles' iterations evenly. `groups` is the groups the device holds at once (groups a unit x
/// units): a grid of whole waves needs no sharing; otherwise the last partial wave and one full
/// one are shared by `groups`; with fewer tiles than that, by at most 8 groups a tile and never
/// more groups than iterations (each shared group takes at least one).
struct gemm_streamk_grid {
  std::int64_t whole = 0, shared = 0;
  bool operator==(const gemm_streamk_grid&) const = default;
};
gemm_streamk_grid streamk_grid(std::int64_t tiles, std::int64_t iters_per_tile, std::int64_t groups);

}  // namespace prism
