// SPDX-License-Identifier: Apache-2.0
// prism scaled-dot-product attention, online softmax (flash-style): O = softmax(scale*Q@K^T + mask) @ V.
// Q [B,Hq,Lq,D], K [B,Hkv,Lk,D], V [B,Hkv,Lk,DV], O [B,Hq,Lq,DV], any strides (in elements);
// query head h reads kv head h / (Hq/Hkv) (GQA). One work-item owns one query row: q and the
// DV-wide accumulator stay in registers while keys stream by in blocks of BK scores (one
// rescale per block). With USE_LOCAL the work-group's BQ rows share each K/V block staged in
// local memory (GPU); without it every work-item reads K/V directly (CPU, no barriers).
// CAUSAL: query i sees keys j <= Lk - Lq + i (q rows are the last Lq positions, KV cache decode).
// MASK_KIND: 0 none, 1 additive (the storage dtype), 2 boolean (uchar, nonzero = attend); mask strides may be 0
// (broadcast). KEY_MASK: a [B, Lk] key mask (padding) on top of both. A row that sees no key
// outputs zeros.
// VW > 1 (without USE_LOCAL, unit head-dim strides, D and DV multiples of VW): q, K, V and the
// accumulator move as floatVW vectors along the head dim (the CPU path: one row per work-item
// leaves nothing for PoCL to vectorise across work-items in decode).
// Build defines: PRISM_DTYPE, D, DV, BQ (work-group size), BK, USE_LOCAL, CAUSAL, MASK_KIND, KEY_MASK
// (with KM_T), VW.
// Validity: BQ <= max work-group size; with USE_LOCAL, BK*(D+DV)*4 bytes <= local memory.

#include "gemm_common.cl"  // dtype load/store macros, epilogue (resolved by build_kernel)

#if VW > 1
#define VT GEMM_CAT(float, VW)
#define LOADQ(c) PRISM_LOADV(Q + (c) * VW)
#define KEYV(jj, c) PRISM_LOADV(Kp + (long)(j0 + (jj)) * sk.s2 + (c) * VW)
#define VALV(jj, c) PRISM_LOADV(Vp + (long)(j0 + (jj)) * sv.s2 + (c) * VW)
#define HSUM(x) prism_hsum(x)
#else
#define VT float
#define LOADQ(c) PRISM_LOAD(Q + (c) * sq.s3)
#define KEYV(jj, c) KEY(jj, c)
#define VALV(jj, c) VAL(jj, c)
#define HSUM(x) (x)
#endif

#include "attention_common.cl"  // mask_t, MASK_VALUE

__kernel __attribute__((reqd_work_group_size(BQ, 1, 1)))
void attention(int Hq, int Hkv, int Lq, int Lk, float scale,
               __global const GT* Q, long q_off, long4 sq, __global const GT* Kp, long k_off, long4 sk,
               __global const GT* Vp, long v_off, long4 sv, __global GT* O, long o_off, long4 so,
               __global const mask_t* Mk, long m_off, long4 sm, __global const km_t* Km, long km_off,
               long skb, long skt) {
  // Strides (.s0 batch, .s1 head, .s2 row, .s3 column) in elements; sm may hold zeros.
  const int i = get_global_id(0);
  const int h = get_global_id(1);
  const long b = get_global_id(2);
  const int hk = h / (Hq / Hkv);
  const bool active = i < Lq;
  const int qi = active ? i : Lq - 1;
  Q += q_off + b * sq.s0 + h * sq.s1 + qi * sq.s2;
  Kp += k_off + b * sk.s0 + hk * sk.s1;
  Vp += v_off + b * sv.s0 + hk * sv.s1;
#if MASK_KIND != 0
  Mk += m_off + b * sm.s0 + h * sm.s1 + qi * sm.s2;
#endif
#if KEY_MASK
  Km += km_off + b * skb;
#endif

  VT q[D / VW];
#pragma unroll
  for (int c = 0; c < D / VW; ++c) q[c] = LOADQ(c) * scale;
  VT acc[DV / VW];
#pragma unroll
  for (int c = 0; c < DV / VW; ++c) acc[c] = (VT)(0.0f);
  float row_max = -INFINITY, row_sum = 0.0f;

  // Keys this row may see; with USE_LOCAL the loop bound must be uniform over the work-group.
#if CAUSAL
  const int my_end = min(Lk, Lk - Lq + qi + 1);
#else
  const int my_end = Lk;
#endif
#if USE_LOCAL
  __local float Ks[BK][D];
  __local float Vs[BK][DV];
  const int lid = get_local_id(0);
#if CAUSAL
  const int last_q = min((int)(get_group_id(0) * BQ + BQ - 1), Lq - 1);
  const int loop_end = min(Lk, Lk - Lq + last_q + 1);
#else
  const int loop_end = Lk;
#endif
#else
  const int loop_end = my_end;
#endif

  for (int j0 = 0; j0 < loop_end; j0 += BK) {
#if USE_LOCAL
    for (int idx = lid; idx < BK * D; idx += BQ) {
      const int jj = idx / D, d = idx % D;
      Ks[jj][d] = (j0 + jj < Lk) ? PRISM_LOAD(Kp + (long)(j0 + jj) * sk.s2 + d * sk.s3) : 0.0f;
    }
    for (int idx = lid; idx < BK * DV; idx += BQ) {
      const int jj = idx / DV, d = idx % DV;
      Vs[jj][d] = (j0 + jj < Lk) ? PRISM_LOAD(Vp + (long)(j0 + jj) * sv.s2 + d * sv.s3) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#define KEY(jj, d) Ks[jj][d]
#define VAL(jj, d) Vs[jj][d]
#else
#define KEY(jj, d) PRISM_LOAD(Kp + (long)(j0 + (jj)) * sk.s2 + (d) * sk.s3)
#define VAL(jj, d) PRISM_LOAD(Vp + (long)(j0 + (jj)) * sv.s2 + (d) * sv.s3)
#endif
    float s[BK];
    float block_max = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < BK; ++jj) {
      const int j = j0 + jj;
      float v = -INFINITY;
      if (j < my_end && KEY_OK(j)) {
        VT dot = (VT)(0.0f);
#pragma unroll
        for (int c = 0; c < D / VW; ++c) dot = fma(q[c], KEYV(jj, c), dot);
        v = HSUM(dot);
#if MASK_KIND != 0
        v += MASK_VALUE(Mk + (long)j * sm.s3);
#endif
      }
      s[jj] = v;
      block_max = fmax(block_max, v);
    }
    if (block_max > -INFINITY) {
      const float new_max = fmax(row_max, block_max);
      const float corr = exp(row_max - new_max);  // exp(-inf) = 0 on the first block
      row_sum *= corr;
#pragma unroll
      for (int c = 0; c < DV / VW; ++c) acc[c] *= corr;
#pragma unroll
      for (int jj = 0; jj < BK; ++jj) {
        const float p = exp(s[jj] - new_max);  // masked keys: exp(-inf) = 0
        row_sum += p;
        if (p != 0.0f) {
#pragma unroll
          for (int c = 0; c < DV / VW; ++c) acc[c] = fma((VT)(p), VALV(jj, c), acc[c]);
        }
      }
      row_max = new_max;
    }
#if USE_LOCAL
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
#undef KEY
#undef VAL
  }

  if (active) {
    const float inv = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
    __global GT* o = O + o_off + b * so.s0 + h * so.s1 + (long)i * so.s2;
#pragma unroll
    for (int c = 0; c < DV / VW; ++c) {
#if VW > 1
      float lanes[VW];
      GEMM_CAT(vstore, VW)(acc[c] * inv, 0, lanes);
      for (int l = 0; l < VW; ++l) PRISM_STORE(o + (c * VW + l) * so.s3, lanes[l]);
#else
      PRISM_STORE(o + c * so.s3, acc[c] * inv);
#endif
    }
  }
}
