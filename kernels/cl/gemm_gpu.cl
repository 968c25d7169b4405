// SPDX-License-Identifier: Apache-2.0
// prism GEMM, GPU-friendly variant: C = alpha * A@B + beta * bias with local-memory tiling.
// A work-group of (TN/WN) x (TM/WM) work-items computes a TM x TN tile of C; per TK-step it
// stages a TM x TK slice of A and a TK x TN slice of B in local memory (zero-filled past the
// edges), then each work-item accumulates a WM x WN register block whose rows/columns are
// strided by the work-group dims (m = ty + i*LY, n = tx + j*LX), so local reads are
// conflict-free and global loads walk each operand's contiguous dim (A_KCONTIG / B_NCONTIG).
// With GV=4 the register block is contiguous instead (m = ty*WM + i, n = tx*WN + j) and read
// from local memory as float4 (one 128-bit load per 4 values; rows padded by 4 to stay aligned).
// Operand layout and epilogue as in gemm_cpu.cl.
// Build defines: PRISM_DTYPE, TM, TN, TK, WM, WN, GV (1/4), A_KCONTIG (0/1), B_NCONTIG (0/1), HAS_BIAS.
// Validity: TM % WM == 0, TN % WN == 0, GV == 4 needs WM % 4 == WN % 4 == 0, (TM/WM)*(TN/WN) <=
// device max work-group size, (TM + TN + 2*PAD) * TK * 4 bytes <= local memory.

#include "gemm_common.cl"  // dtype load/store macros, epilogue (resolved by build_kernel)

#ifndef GV
#define GV 1
#endif
#if GV == 4
#define PAD 4
#define ROW(i) (ty * WM + (i))
#define COL(j) (tx * WN + (j))
#else
#define PAD 1
#define ROW(i) (ty + (i) * LY)
#define COL(j) (tx + (j) * LX)
#endif

#define LX (TN / WN)
#define LY (TM / WM)
#define NTHREADS (LX * LY)

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void gemm_gpu(int M, int N, int K, float alpha, float beta,
              __global const GT* A, long a_off, int sam, int sak, long sab,
              __global const GT* B, long b_off, int sbk, int sbn, long sbb,
              __global GT* C, long c_off, int scm, long scb,
              __global const GT* X, long x_off, int sxm, int sxn) {
  // +1 columns: the transposing stores (stride TM+1 / TN+1) then hit distinct banks.
  __local float As[TK][TM + PAD] __attribute__((aligned(16)));
  __local float Bs[TK][TN + PAD] __attribute__((aligned(16)));
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int tid = ty * LX + tx;
  const int n0 = get_group_id(0) * TN, m0 = get_group_id(1) * TM;
  const long bt = get_group_id(2);
  A += a_off + bt * sab;
  B += b_off + bt * sbb;
  C += c_off + bt * scb;

  float acc[WM][WN];
#pragma unroll
  for (int i = 0; i < WM; ++i)
#pragma unroll
    for (int j = 0; j < WN; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += TK) {
#pragma unroll
    for (int r = 0; r < (TM * TK + NTHREADS - 1) / NTHREADS; ++r) {
      const int idx = tid + r * NTHREADS;
      if ((TM * TK) % NTHREADS != 0 && idx >= TM * TK) break;
#if A_KCONTIG
      const int mm = idx / TK, kk = idx % TK;
#else
      const int kk = idx / TM, mm = idx % TM;
#endif
      const int m = m0 + mm, k = k0 + kk;
      As[kk][mm] = (m < M && k < K) ? PRISM_LOAD(A + (long)m * sam + (long)k * sak) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < (TN * TK + NTHREADS - 1) / NTHREADS; ++r) {
      const int idx = tid + r * NTHREADS;
      if ((TN * TK) % NTHREADS != 0 && idx >= TN * TK) break;
#if B_NCONTIG
      const int kk = idx / TN, nn = idx % TN;
#else
      const int nn = idx / TK, kk = idx % TK;
#endif
      const int n = n0 + nn, k = k0 + kk;
      Bs[kk][nn] = (n < N && k < K) ? PRISM_LOAD(B + (long)k * sbk + (long)n * sbn) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
    for (int kk = 0; kk < TK; ++kk) {
      float a[WM], b[WN];
#if GV == 4
#pragma unroll
      for (int i = 0; i < WM; i += 4) vstore4(vload4(0, &As[kk][ROW(i)]), 0, a + i);
#pragma unroll
      for (int j = 0; j < WN; j += 4) vstore4(vload4(0, &Bs[kk][COL(j)]), 0, b + j);
#else
#pragma unroll
      for (int i = 0; i < WM; ++i) a[i] = As[kk][ROW(i)];
#pragma unroll
      for (int j = 0; j < WN; ++j) b[j] = Bs[kk][COL(j)];
#endif
#pragma unroll
      for (int i = 0; i < WM; ++i)
#pragma unroll
        for (int j = 0; j < WN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

#pragma unroll
  for (int i = 0; i < WM; ++i) {
    const int m = m0 + ROW(i);
    if (m < M) {
#pragma unroll
      for (int j = 0; j < WN; ++j) {
        const int n = n0 + COL(j);
        if (n < N) PRISM_STORE(C + (long)m * scm + n, prism_epilogue(acc[i][j], alpha, beta, X, x_off, sxm, sxn, m, n));
      }
    }
  }
}
