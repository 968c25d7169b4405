// SPDX-License-Identifier: Apache-2.0
// linear_silu_and_mul: out[m, j] = silu(x[m] . w[j]) * (x[m] . w[F + j]) for a fused gate|up
// weight [2F, K] (the SwiGLU MLP's first half in one kernel, for decode's small M). Parallel over
// output pairs and K like gemm_gemv.cl: a work-group owns NB pairs (2 NB weight rows) of MB input
// rows; work-item t sums k = t, t + WG, ... (weight rows read coalesced), then a local-memory tree
// reduction and the gated store. VEC16=1 (rows 16-byte aligned) reads 16 bytes per load.
// Build defines: PRISM_DTYPE, HAS_BIAS=0, MB, NB, WG (power of two), VEC16 (0/1).

#include "gemm_common.cl"

#ifndef VEC16
#define VEC16 0
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void gemv_silu_and_mul(int M, int F, int K, __global const GT* A, long a_off, int sam, __global const GT* W,
                       long w_off, int swn, __global GT* C, long c_off, int scm) {
  __local float red[MB * NB * 2][WG];
  const int t = get_local_id(0);
  const int j0 = get_group_id(0) * NB;
  const int m0 = get_group_id(1) * MB;
  const int rows = min(MB, M - m0);
  A += a_off + (long)m0 * sam;
  C += c_off + (long)m0 * scm;
  float acc[MB][2 * NB];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) acc[i][c] = 0.0f;
  const __global GT* wrow[2 * NB];
#pragma unroll
  for (int c = 0; c < NB; ++c) {
    const int j = min(j0 + c, F - 1);
    wrow[2 * c] = W + w_off + (long)j * swn;
    wrow[2 * c + 1] = W + w_off + (long)(F + j) * swn;
  }
#if VEC16
  // 16-byte loads (rows 16-byte aligned): work-item t takes the V16-element pieces t, t + WG, ...;
  // the last K % V16 elements go one by one below.
  for (int k = t * V16; k + V16 <= K; k += WG * V16) {
    VT16 b[2 * NB];
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) b[c] = prism_load16(wrow[c] + k);
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i < rows) {
        const VT16 a = prism_load16(A + (long)i * sam + k);
#pragma unroll
        for (int c = 0; c < 2 * NB; ++c) acc[i][c] += prism_vdot16(a, b[c]);
      }
    }
  }
  for (int k = K / V16 * V16 + t; k < K; k += WG) {
#else
  for (int k = t; k < K; k += WG) {
#endif
    float b[2 * NB];
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) b[c] = PRISM_LOAD(wrow[c] + k);
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i < rows) {
        const float a = PRISM_LOAD(A + (long)i * sam + k);
#pragma unroll
        for (int c = 0; c < 2 * NB; ++c) acc[i][c] = fma(a, b[c], acc[i][c]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) red[i * 2 * NB + c][t] = acc[i][c];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (t < s) {
#pragma unroll
      for (int r = 0; r < MB * NB * 2; ++r) red[r][t] += red[r][t + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = t; r < MB * NB; r += WG) {
    const int i = r / NB, c = r % NB, j = j0 + c;
    if (i < rows && j < F) {
      const float g = red[i * 2 * NB + 2 * c][0], u = red[i * 2 * NB + 2 * c + 1][0];
      PRISM_STORE(C + (long)i * scm + j, g / (1.0f + exp(-g)) * u);
    }
  }
}

// Variant 1 (CPUs): one work-item per NB output pairs of one input row, sweeping K VW-wide
// (PoCL vectorizes each item's K loop; the k-split of variant 0 costs it a barrier per step).
// Build defines: PRISM_DTYPE, HAS_BIAS=0, NB, VW.
#if VW == 1
typedef float gated_floatv;
#else
typedef GEMM_CAT(float, VW) gated_floatv;
#endif
__kernel void gemv_silu_and_mul_rows(int M, int F, int K, __global const GT* A, long a_off, int sam,
                                     __global const GT* W, long w_off, int swn, __global GT* C, long c_off,
                                     int scm) {
  const int j0 = get_global_id(0) * NB, m = get_global_id(1);
  if (j0 >= F || m >= M) return;
  const __global GT* a = A + a_off + (long)m * sam;
  const __global GT* wrow[2 * NB];
#pragma unroll
  for (int c = 0; c < NB; ++c) {
    const int j = min(j0 + c, F - 1);
    wrow[2 * c] = W + w_off + (long)j * swn;
    wrow[2 * c + 1] = W + w_off + (long)(F + j) * swn;
  }
  gated_floatv accv[2 * NB];
#pragma unroll
  for (int c = 0; c < 2 * NB; ++c) accv[c] = (gated_floatv)(0.0f);
  int k = 0;
  for (; k + VW <= K; k += VW) {
    const gated_floatv x = PRISM_LOADV(a + k);
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) accv[c] = fma(x, PRISM_LOADV(wrow[c] + k), accv[c]);
  }
  float acc[2 * NB];
#pragma unroll
  for (int c = 0; c < 2 * NB; ++c) acc[c] = prism_hsum(accv[c]);
  for (; k < K; ++k) {
    const float x = PRISM_LOAD(a + k);
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) acc[c] = fma(x, PRISM_LOAD(wrow[c] + k), acc[c]);
  }
  __global GT* out = C + c_off + (long)m * scm;
#pragma unroll
  for (int c = 0; c < NB; ++c)
    if (j0 + c < F) {
      const float g = acc[2 * c], u = acc[2 * c + 1];
      PRISM_STORE(out + j0 + c, g / (1.0f + exp(-g)) * u);
    }
}
