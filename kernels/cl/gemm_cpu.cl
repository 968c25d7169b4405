// SPDX-License-Identifier: Apache-2.0
// prism GEMM, CPU-friendly variant (PoCL): C = alpha * A@B + beta * bias, register-blocked,
// vector loads along one contiguous dim, no local memory and no barriers.
//
// Layout: A(m,k) = A[a_off + b*sab + m*sam + k*sak], B(k,n) = B[b_off + b*sbb + k*sbk + n*sbn],
// C(m,n) = C[c_off + b*scb + m*scm + n] (C rows contiguous), bias(m,n) = bias[m*sxm + n*sxn].
// One work-item owns an RM x (RN*VW) block (FORM_OUTER) or an RM x RN block (FORM_DOT).
//   FORM_OUTER: per k, RN vectors of B row k times RM broadcast scalars of A; vector loads
//              of B when B_NCONTIG (sbn == 1), per-lane strided loads otherwise.
//   FORM_DOT   needs sak == sbk == 1: VW-wide partial dot products along k, summed at the end.
// K-blocking without barriers: the host may split K into slices of kc launched in turn, each
// covering a cache-sized panel. `accumulate`: 0 one launch over all of K (the full epilogue);
// with slices, 3 the first (C = alpha*A@B + beta*bias, no activation), 1 a middle one
// (C += alpha*A@B), 2 the last (C = act(C + alpha*A@B)); without ACT the host passes 0 and 1 only.
// Edge rows/columns are clamped for loads and skipped for stores, so every work-item runs the
// vector path; only FORM_OUTER's last column block falls back to per-lane loads.
// Build defines: PRISM_DTYPE (0 f32, 1 f16, 2 bf16), VW (1,2,4,8,16), RM, RN, FORM_OUTER|FORM_DOT,
// HAS_BIAS, KU (k unroll) and B_NCONTIG (FORM_OUTER); PACK_B (FORM_OUTER with B_NCONTIG, VW > 1,
// one column block a group): the panel's rows (>= the launch's K), copied to local memory first.

#include "gemm_common.cl"  // dtype load/store macros, epilogue (resolved by build_kernel)

// VT: VW floats (a scalar at VW = 1, where OpenCL C has no float1, vload1 or vstore1).
#if VW == 1
#define VT float
#define VT_FROM_LANES(l) ((l)[0])
#define VT_TO_LANES(v, l) ((l)[0] = (v))
#else
#define VT GEMM_CAT(float, VW)
#define VT_FROM_LANES(l) GEMM_CAT(vload, VW)(0, (l))
#define VT_TO_LANES(v, l) GEMM_CAT(vstore, VW)((v), 0, (l))
#endif

#define CPU_STORE(p, v, m, n)                                                                      \
  PRISM_STORE(p, accumulate == 0   ? prism_epilogue(v, alpha, beta, X, x_off, sxm, sxn, m, n)      \
                 : accumulate == 3 ? prism_bias_epilogue(v, alpha, beta, X, x_off, sxm, sxn, m, n) \
                 : accumulate == 2 ? prism_activation(PRISM_LOAD(p) + alpha * (v))                 \
                                   : PRISM_LOAD(p) + alpha * (v))

#if defined(FORM_OUTER)
__kernel void gemm_cpu(int M, int N, int K, float alpha, float beta,
                       __global const GT* A, long a_off, int sam, int sak, long sab,
                       __global const GT* B, long b_off, int sbk, int sbn, long sbb,
                       __global GT* C, long c_off, int scm, long scb,
                       __global const GT* X, long x_off, int sxm, int sxn, int accumulate) {
  const int n0 = (int)get_global_id(0) * (RN * VW);
  const int m0 = (int)get_global_id(1) * RM;
  const long bt = get_global_id(2);
#if defined(PACK_B)
  // The group's items share one column block (lx = 1, so n0 is the group's): its K x RN*VW panel
  // of B is copied once into local memory, contiguous, so the k loop below reads it without
  // walking B's rows N apart (a TLB miss a row at large N). The copy precedes the rows' early
  // exit: every item reaches the barrier.
  __local float panel[PACK_B][RN * VW];
  if (n0 + RN * VW <= N) {  // a full column block (the whole group's); the last one reads B itself
    const __global GT* src = B + b_off + bt * sbb + (long)n0;
    const int step = (int)get_local_size(1);
    for (int k = (int)get_local_id(1); k < K; k += step)
#pragma unroll
      for (int j = 0; j < RN; ++j) GEMM_CAT(vstore, VW)(PRISM_LOADV(src + (long)k * sbk + j * VW), 0, &panel[k][j * VW]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (m0 >= M || n0 >= N) return;
#else
  if (m0 >= M || n0 >= N) return;
#endif
  A += a_off + bt * sab;
  B += b_off + bt * sbb;
  C += c_off + bt * scb;

  const __global GT* arow[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) arow[i] = A + (long)min(m0 + i, M - 1) * sam;

  VT acc[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = (VT)(0.0f);

  const __global GT* bp = B + (long)n0 * sbn;
  // The full column blocks' k loop reads B's row k through B_VEC and steps with B_NEXT: from the
  // packed panel in local memory (PACK_B, built with B_NCONTIG only), else from B itself.
#if defined(PACK_B)
  __local const float* lp = &panel[0][0];
#define B_VEC(j) GEMM_CAT(vload, VW)(0, lp + (j) * VW)
#define B_NEXT() (lp += RN * VW)
#else
#define B_VEC(j) PRISM_LOADV(bp + (j) * VW)
#define B_NEXT() (bp += sbk)
#endif
  if (B_NCONTIG && n0 + RN * VW <= N) {
    int k = 0;
    for (; k + KU <= K; k += KU) {
#pragma unroll
      for (int u = 0; u < KU; ++u) {
        VT bv[RN];
#pragma unroll
        for (int j = 0; j < RN; ++j) bv[j] = B_VEC(j);
#pragma unroll
        for (int i = 0; i < RM; ++i) {
          const float a = PRISM_LOAD(arow[i] + (long)(k + u) * sak);
#pragma unroll
          for (int j = 0; j < RN; ++j) acc[i][j] = fma((VT)(a), bv[j], acc[i][j]);
        }
        B_NEXT();
      }
    }
    for (; k < K; ++k) {
      VT bv[RN];
#pragma unroll
      for (int j = 0; j < RN; ++j) bv[j] = B_VEC(j);
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float a = PRISM_LOAD(arow[i] + (long)k * sak);
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = fma((VT)(a), bv[j], acc[i][j]);
      }
      B_NEXT();
    }
  } else {
    // Strided B, or the last column block: per-lane loads; lanes past N load column N-1 and
    // are not stored.
    for (int k = 0; k < K; ++k) {
      VT bv[RN];
#pragma unroll
      for (int j = 0; j < RN; ++j) {
        float lanes[VW];
#pragma unroll 1
        for (int l = 0; l < VW; ++l) lanes[l] = PRISM_LOAD(bp + (long)min(j * VW + l, N - 1 - n0) * sbn);
        bv[j] = VT_FROM_LANES(lanes);
      }
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float a = PRISM_LOAD(arow[i] + (long)k * sak);
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = fma((VT)(a), bv[j], acc[i][j]);
      }
      bp += sbk;
    }
  }

#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int m = m0 + i;
    if (m < M) {
      __global GT* crow = C + (long)m * scm;
#pragma unroll
      for (int j = 0; j < RN; ++j) {
        float lanes[VW];
        VT_TO_LANES(acc[i][j], lanes);
#pragma unroll 1
        for (int l = 0; l < VW; ++l) {
          const int n = n0 + j * VW + l;
          if (n < N)
            CPU_STORE(crow + n, lanes[l], m, n);
        }
      }
    }
  }
}
#undef B_VEC
#undef B_NEXT
#elif defined(FORM_DOT)
__kernel void gemm_cpu(int M, int N, int K, float alpha, float beta,
                       __global const GT* A, long a_off, int sam, int sak, long sab,
                       __global const GT* B, long b_off, int sbk, int sbn, long sbb,
                       __global GT* C, long c_off, int scm, long scb,
                       __global const GT* X, long x_off, int sxm, int sxn, int accumulate) {
  const int n0 = (int)get_global_id(0) * RN;
  const int m0 = (int)get_global_id(1) * RM;
  const long bt = get_global_id(2);
  if (m0 >= M || n0 >= N) return;
  A += a_off + bt * sab;
  B += b_off + bt * sbb;
  C += c_off + bt * scb;

  const __global GT* arow[RM];
  const __global GT* bcol[RN];
#pragma unroll
  for (int i = 0; i < RM; ++i) arow[i] = A + (long)min(m0 + i, M - 1) * sam;
#pragma unroll
  for (int j = 0; j < RN; ++j) bcol[j] = B + (long)min(n0 + j, N - 1) * sbn;

  VT acc[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = (VT)(0.0f);

  int k = 0;
  for (; k + VW <= K; k += VW) {
    VT av[RM], bv[RN];
#pragma unroll
    for (int i = 0; i < RM; ++i) av[i] = PRISM_LOADV(arow[i] + k);
#pragma unroll
    for (int j = 0; j < RN; ++j) bv[j] = PRISM_LOADV(bcol[j] + k);
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < RN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
  }
  float sum[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) sum[i][j] = prism_hsum(acc[i][j]);
  for (; k < K; ++k) {
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const float a = PRISM_LOAD(arow[i] + k);
#pragma unroll
      for (int j = 0; j < RN; ++j) sum[i][j] = fma(a, PRISM_LOAD(bcol[j] + k), sum[i][j]);
    }
  }
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int m = m0 + i;
    if (m < M) {
#pragma unroll
      for (int j = 0; j < RN; ++j) {
        const int n = n0 + j;
        __global GT* c = C + (long)m * scm + n;
        if (n < N)
          CPU_STORE(c, sum[i][j], m, n);
      }
    }
  }
}
#else
#error "gemm_cpu.cl: define FORM_OUTER or FORM_DOT"
#endif
