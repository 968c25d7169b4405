// SPDX-License-Identifier: Apache-2.0
// Decode GEMVs with the step's neighbours folded in, for small M:
// - linear_silu_and_mul (GATED=1): out[m, j] = silu(x[m] . w[j]) * (x[m] . w[F + j]) for a fused
//   gate|up weight [2F, K] (the SwiGLU MLP's first half in one kernel);
// - rms_norm_linear (GATED=0): out[m, j] = x[m] . w[j] (+ bias[j]), F output rows.
// NORM=1 puts an RMSNorm in front: x[m] is read as x[m, k] * g[k] and the dot products are scaled
// by rsqrt(mean_k x[m, k]^2 + eps), the mean square summed from the same loads. Every work-group
// reads all of x[m] for its dots anyway, so the norm costs no extra pass and no launch.
// Variant 0 (GPUs), parallel over output units and K like gemm_gemv.cl: a work-group owns NB
// units (NB gate/up pairs or NB rows) of MB input rows; work-item t sums k = t, t + WG, ...
// (weight rows read coalesced), then a local-memory tree reduction and the store. VEC16=1 (rows
// 16-byte aligned) reads 16 bytes per load.
// Build defines: PRISM_DTYPE, HAS_BIAS=0 (gemm_common's epilogue, unused), GATED (0/1), NORM (0/1),
// ROW_BIAS (0/1, GATED=0 only), MB, NB, WG (power of two), VEC16 (0/1); variant 1: NB, VW.

#include "gemm_common.cl"

#ifndef VEC16
#define VEC16 0
#endif
#ifndef GATED
#define GATED 1
#endif
#ifndef NORM
#define NORM 0
#endif
#ifndef ROW_BIAS
#define ROW_BIAS 0
#endif
// Weight rows per output unit: a gate and an up row, or one row.
#define RPU (GATED ? 2 : 1)

// Unit c's weight rows: gate row j and up row F + j, or row j (j clamped: units past F read row
// F - 1, in bounds, and are never stored).
inline void gemv_unit_rows(__global const GT* W, long w_off, int swn, int F, int j0,
                           const __global GT** wrow) {
#pragma unroll
  for (int c = 0; c < NB; ++c) {
    const int j = min(j0 + c, F - 1);
    wrow[RPU * c] = W + w_off + (long)j * swn;
#if GATED
    wrow[RPU * c + 1] = W + w_off + (long)(F + j) * swn;
#endif
  }
}

// Unit c's result from its row sums (already scaled by the norm): SiLU(gate) * up, or the dot
// plus the bias.
inline float gemv_unit_value(const float* s, int c, int j, __global const GT* Bias, long b_off) {
#if GATED
  const float g = s[2 * c], u = s[2 * c + 1];
  return g / (1.0f + exp(-g)) * u;
#elif ROW_BIAS
  return s[c] + PRISM_LOAD(Bias + b_off + j);
#else
  return s[c];
#endif
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void gemv_decode(int M, int F, int K, __global const GT* A, long a_off, int sam, __global const GT* W, long w_off,
                 int swn, __global GT* C, long c_off, int scm, __global const GT* G, long g_off, float eps,
                 __global const GT* Bias, long b_off) {
  // Rows MB * NB * RPU .. + MB: the per-row sums of squares (NORM).
  __local float red[MB * NB * RPU + MB][WG];
  const int t = get_local_id(0);
  const int j0 = get_group_id(0) * NB;
  const int m0 = get_group_id(1) * MB;
  const int rows = min(MB, M - m0);
  A += a_off + (long)m0 * sam;
  C += c_off + (long)m0 * scm;
  float acc[MB][RPU * NB];
  float ss[MB];
#pragma unroll
  for (int i = 0; i < MB; ++i) {
    ss[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < RPU * NB; ++c) acc[i][c] = 0.0f;
  }
  const __global GT* wrow[RPU * NB];
  gemv_unit_rows(W, w_off, swn, F, j0, wrow);
#if VEC16
  // 16-byte loads (rows 16-byte aligned): work-item t takes the V16-element pieces t, t + WG, ...;
  // the last K % V16 elements go one by one below.
  for (int k = t * V16; k + V16 <= K; k += WG * V16) {
    VT16 b[RPU * NB];
#pragma unroll
    for (int c = 0; c < RPU * NB; ++c) b[c] = prism_load16(wrow[c] + k);
#if NORM
    const VT16 g = prism_load16(G + g_off + k);
#endif
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i < rows) {
        VT16 a = prism_load16(A + (long)i * sam + k);
#if NORM
        ss[i] += prism_vdot16(a, a);
        a *= g;
#endif
#pragma unroll
        for (int c = 0; c < RPU * NB; ++c) acc[i][c] += prism_vdot16(a, b[c]);
      }
    }
  }
  for (int k = K / V16 * V16 + t; k < K; k += WG) {
#else
  for (int k = t; k < K; k += WG) {
#endif
    float b[RPU * NB];
#pragma unroll
    for (int c = 0; c < RPU * NB; ++c) b[c] = PRISM_LOAD(wrow[c] + k);
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i < rows) {
        float a = PRISM_LOAD(A + (long)i * sam + k);
#if NORM
        ss[i] = fma(a, a, ss[i]);
        a *= PRISM_LOAD(G + g_off + k);
#endif
#pragma unroll
        for (int c = 0; c < RPU * NB; ++c) acc[i][c] = fma(a, b[c], acc[i][c]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < MB; ++i) {
#pragma unroll
    for (int c = 0; c < RPU * NB; ++c) red[i * RPU * NB + c][t] = acc[i][c];
#if NORM
    red[MB * NB * RPU + i][t] = ss[i];
#endif
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (t < s) {
#pragma unroll
      for (int r = 0; r < MB * NB * RPU + (NORM ? MB : 0); ++r) red[r][t] += red[r][t + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = t; r < MB * NB; r += WG) {
    const int i = r / NB, c = r % NB, j = j0 + c;
    if (i < rows && j < F) {
#if NORM
      const float scale = rsqrt(red[MB * NB * RPU + i][0] / (float)K + eps);
#else
      const float scale = 1.0f;
#endif
      float s[RPU * NB];
#pragma unroll
      for (int p = 0; p < RPU; ++p) s[RPU * c + p] = red[i * RPU * NB + RPU * c + p][0] * scale;
      PRISM_STORE(C + (long)i * scm + j, gemv_unit_value(s, c, j, Bias, b_off));
    }
  }
}

// Variant 1 (CPUs): one work-item per NB output units of one input row, sweeping K VW-wide
// (PoCL vectorizes each item's K loop; the k-split of variant 0 costs it a barrier per step).
#if VW == 1
typedef float gated_floatv;
#else
typedef GEMM_CAT(float, VW) gated_floatv;
#endif
__kernel void gemv_decode_rows(int M, int F, int K, __global const GT* A, long a_off, int sam, __global const GT* W,
                               long w_off, int swn, __global GT* C, long c_off, int scm, __global const GT* G,
                               long g_off, float eps, __global const GT* Bias, long b_off) {
  const int j0 = get_global_id(0) * NB, m = get_global_id(1);
  if (j0 >= F || m >= M) return;
  const __global GT* a = A + a_off + (long)m * sam;
  const __global GT* wrow[RPU * NB];
  gemv_unit_rows(W, w_off, swn, F, j0, wrow);
  gated_floatv accv[RPU * NB];
#pragma unroll
  for (int c = 0; c < RPU * NB; ++c) accv[c] = (gated_floatv)(0.0f);
  gated_floatv ssv = (gated_floatv)(0.0f);
  int k = 0;
  for (; k + VW <= K; k += VW) {
    gated_floatv x = PRISM_LOADV(a + k);
#if NORM
    ssv = fma(x, x, ssv);
    x *= PRISM_LOADV(G + g_off + k);
#endif
#pragma unroll
    for (int c = 0; c < RPU * NB; ++c) accv[c] = fma(x, PRISM_LOADV(wrow[c] + k), accv[c]);
  }
  float acc[RPU * NB];
#pragma unroll
  for (int c = 0; c < RPU * NB; ++c) acc[c] = prism_hsum(accv[c]);
  float ss = prism_hsum(ssv);
  for (; k < K; ++k) {
    float x = PRISM_LOAD(a + k);
#if NORM
    ss = fma(x, x, ss);
    x *= PRISM_LOAD(G + g_off + k);
#endif
#pragma unroll
    for (int c = 0; c < RPU * NB; ++c) acc[c] = fma(x, PRISM_LOAD(wrow[c] + k), acc[c]);
  }
#if NORM
  const float scale = rsqrt(ss / (float)K + eps);
#pragma unroll
  for (int c = 0; c < RPU * NB; ++c) acc[c] *= scale;
#endif
  __global GT* out = C + c_off + (long)m * scm;
#pragma unroll
  for (int c = 0; c < NB; ++c)
    if (j0 + c < F) PRISM_STORE(out + j0 + c, gemv_unit_value(acc, c, j0 + c, Bias, b_off));
}
