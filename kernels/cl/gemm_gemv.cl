// SPDX-License-Identifier: Apache-2.0
// prism GEMM, small-M variant (decode): parallel over N and K. A work-group of WG work-items
// owns NB output columns of MB rows (dim 1 walks row blocks, so any M is valid, though M <= MB
// is the case it is for); work-item t sums k = t, t+WG, ... (so a
// row of a k-contiguous B, e.g. a linear weight [N,K], is read coalesced), then a local-memory
// tree reduction. Operand layout and epilogue as in gemm_cpu.cl.
// Build defines: PRISM_DTYPE, MB (max rows), NB (columns per group), WG (power of two), HAS_BIAS.
// Validity: WG a power of two <= max work-group size, MB*NB*WG*4 bytes <= local memory.

#include "gemm_common.cl"  // dtype load/store macros, epilogue (resolved by build_kernel)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void gemm_gemv(int M, int N, int K, float alpha, float beta,
               __global const GT* A, long a_off, int sam, int sak, long sab,
               __global const GT* B, long b_off, int sbk, int sbn, long sbb,
               __global GT* C, long c_off, int scm, long scb,
               __global const GT* X, long x_off, int sxm, int sxn) {
  __local float red[MB * NB][WG];
  const int t = get_local_id(0);
  const int n0 = get_group_id(0) * NB;
  const int m0 = get_group_id(1) * MB;
  const int rows = min(MB, M - m0);
  const long bt = get_group_id(2);
  A += a_off + bt * sab + (long)m0 * sam;
  B += b_off + bt * sbb;
  C += c_off + bt * scb + (long)m0 * scm;

  float acc[MB][NB];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[i][j] = 0.0f;

  const __global GT* bcol[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) bcol[j] = B + (long)min(n0 + j, N - 1) * sbn;
  for (int k = t; k < K; k += WG) {
    float b[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) b[j] = PRISM_LOAD(bcol[j] + (long)k * sbk);
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i < rows) {
        const float a = PRISM_LOAD(A + (long)i * sam + (long)k * sak);
#pragma unroll
        for (int j = 0; j < NB; ++j) acc[i][j] = fma(a, b[j], acc[i][j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) red[i * NB + j][t] = acc[i][j];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (t < s) {
#pragma unroll
      for (int r = 0; r < MB * NB; ++r) red[r][t] += red[r][t + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  // Work-items spread the MB*NB stores.
  for (int r = t; r < MB * NB; r += WG) {
    const int i = r / NB, j = r % NB, n = n0 + j;
    if (i < rows && n < N)
      PRISM_STORE(C + (long)i * scm + n, prism_epilogue(red[r][0], alpha, beta, X, x_off, sxm, sxn, m0 + i, n));
  }
}
