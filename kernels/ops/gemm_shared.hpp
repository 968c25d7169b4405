// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the GEMM and attention descriptors (kernels/ops/matmul.cpp, attention.cpp):
// random sample tensors, index narrowing.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kernels/cl_source.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/error.hpp"
#include "prism/tensor.hpp"

namespace prism::gemm_detail {

/// Random values for a sample input: small integers in [-lo_int, lo_int] (exact products and
/// sums in f32) or uniform reals in [-1, 1].
inline std::vector<float> sample_values(std::int64_t n, const sample_options& o, std::uint64_t salt,
                                        int int_range = 2) {
  std::mt19937_64 rng(o.seed * 0x9e3779b97f4a7c15ull + salt);
  std::vector<float> v(static_cast<std::size_t>(n));
  if (o.small_integers) {
    std::uniform_int_distribution<int> d(-int_range, int_range);
    for (auto& x : v) x = static_cast<float>(d(rng));
  } else {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (auto& x : v) x = d(rng);
  }
  return v;
}

/// A contiguous random tensor of `shape` in `t`.
inline tensor random_tensor(queue& q, const dims& shape, dtype t, const sample_options& o, std::uint64_t salt,
                            int int_range = 2) {
  auto v = sample_values(shape.product(), o, salt, int_range);
  return tensor::from_floats(q, v, shape, t);
}

/// Narrows an element stride/extent to the kernels' 32-bit int arguments.
inline int to_int(std::int64_t v, const char* op, const char* what) {
  if (v > std::numeric_limits<int>::max() || v < std::numeric_limits<int>::min())
    throw error(
        errc::unsupported, fmt::format("ops::{}", op),
        fmt::format("{} = {} does not fit the kernel's 32-bit index; valid: |{}| < 2^31", what, v, what));
  return static_cast<int>(v);
}

inline std::int64_t next_pow2(std::int64_t v) {
  std::int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

/// gemm_common.cl's storage type for an f32, f16 or bf16 operand: "-DPRISM_DTYPE=0|1|2" (the GEMM,
/// GEMV and quantized kernels, gemv_gated.cl and gemv_chain.cl read their GT through it).
inline std::string dtype_define(dtype t) {
  return fmt::format("-DPRISM_DTYPE={}", t == dtype::f32 ? 0 : t == dtype::f16 ? 1 : 2);
}

/// quant_common.cl's QTYPE for a block-quantized weight dtype: 0 q8_0, 1 q4_0, 2 q4_1.
inline int qtype_define(dtype t) {
  return t == dtype::q8_0 ? 0 : t == dtype::q4_0 ? 1 : 2;
}

/// An RMSNorm the quantized GEMV applies to its activations while it quantizes them to int8
/// (rms_norm_linear with a block-quantized weight): x / sqrt(mean(x^2) + eps) * weight.
struct quant_norm {
  tensor weight;
  double eps = 1e-6;
};

/// qp=3's local copy of one activation row of K (gemm_q_blocks_i8 built with QL_K): the int8 bytes,
/// then each 32-block's d and d * sum(q).
inline std::int64_t quant_local_row_bytes(std::int64_t k) {
  return k + k / 32 * 8;
}

/// qp=3's local memory for a group of `warps` teams of `nb` weight rows: the row's copy and the
/// teams' partial sums.
inline std::uint64_t quant_local_walk_bytes(std::int64_t nb, std::int64_t warps, std::int64_t k) {
  return static_cast<std::uint64_t>(nb * 32 * warps * 4 + quant_local_row_bytes(k));
}

/// The `qu` config param of linear and rms_norm_linear (gemm_q_blocks_i8's QB_UNROLL, which the
/// kernel takes as 1, 2 or 4); `scope` says which of the op's configs it applies to.
inline config_param quant_unroll_param(const char* scope) {
  return {"qu",
          2,
          {1, 2, 4},
          fmt::format("{}: blocks a lane loads a step, all their loads issued before the step's dot products",
                      scope)};
}

/// How rms_norm_linear's quantized GEMV walks int8 activations (enqueue_quant_norm_linear), from
/// its config: on the GPU rows kernel qp (0 4-byte slots, 2 a lane per block, 3 the same with the
/// row quantized in each work-group), qu (blocks a lane loads a step, qp 2 and 3) and, for qp=3,
/// the group: nb weight rows a team, wg / 32 teams; on the CPU kernel qx (`x86_dot`: the
/// AVX512-VNNI q4 walk) and the shape: wg work-items a group and nb weight rows a work-item
/// (linear_silu_and_mul: one gate/up pair a work-item, nb=1).
struct quant_walk {
  int qp = 0;
  std::int64_t nb = 4, wg = 256, unroll = 2;
  bool x86_dot = false;
  bool fused = false;  ///< the CPU kernel quantizes its rows itself, no launch of their own (qa=2)
  /// linear_silu_and_mul: the weight is [2 F, k], F gate rows then F up rows, and out [m, F] is
  /// silu(gate) * up (the CPU kernel only: gemm_quant.cl's Q_GATED).
  bool gated = false;
};

/// qa=2: the most activation rows that one work-group quantizes while the others wait.
inline constexpr std::int64_t kFusedQuantizeRows = 8;

/// Why the CPU int8 kernel cannot take the AVX512-VNNI q4 walk (the gemm family's and
/// rms_norm_linear's qx=1) for weights of type `w` (nothing when it can): the walk is
/// gemm_quant.cl's four-block one, for q4_0/q4_1 on int8 activations, and it needs those
/// instructions on the device's host. (It also runs one weight row and one activation row a
/// work-item, which rms_norm_linear's CPU kernel always does and linear's checks itself.)
std::optional<std::string> x86_dot_refusal(const device& dev, dtype w, bool int8);

/// The activation dtype of op's tuning sample `o`: o.type itself, or o.act (f32, f16 or bf16)
/// when o.type is a block-quantized weight dtype (then k must be a whole number of 32-blocks,
/// else a clear error).
dtype sample_activation_type(const char* op, const sample_options& o, std::int64_t k);

/// quantize_rows_q8's work-group with a norm: one row a group, a power of two >= k / 32 items.
inline std::int64_t quantize_norm_group(std::int64_t k) {
  return std::max<std::int64_t>(1, next_pow2(k / 32));
}

/// linear(rms_norm(x, norm), weight, bias) for a block-quantized weight [n, k] (x [m, k], out
/// [m, n]) on linear's quantized GEMV kernels (gemm_quant.cl); no norm when `norm` is null, and
/// walk.gated makes it linear_silu_and_mul's gate/up pair (the CPU kernel). `cpu`: walk.nb weight rows
/// (or one gate/up pair) a work-item, walk.wg items a group (the PoCL decode route's kernel); else the
/// rows kernel, a 32-lane
/// team per 2 weight rows, 8 teams a group (nv auto's M <= 8 choice). `int8`: the activations are
/// quantized to int8 per 32-block with the norm applied on the way (quantize_rows_q8; two
/// commands). Float activations: the rows kernel reads the norm with them (one command: each
/// team sums the row's squares from its own loads); the CPU kernel reads rows the norm wrote.
/// `walk`: the GPU rows kernel's walk on int8 activations (quant_walk).
event enqueue_quant_norm_linear(queue& q, const tensor& x, const quant_norm* norm, const tensor& weight,
                                const tensor& bias, const tensor& out, bool cpu, bool int8,
                                source_override src, const quant_walk& walk = {});

}  // namespace prism::gemm_detail
