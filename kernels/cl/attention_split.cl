// SPDX-License-Identifier: Apache-2.0
// prism scaled-dot-product attention, split over keys (decode-friendly, GPU): one work-group of
// WG work-items per (batch, head, query row). Per block of WG keys, work-item t scores key
// j0+t (q staged in local memory), the group reduces the block max and sum in local memory
// (online softmax: one rescale per block), then the work-items switch to owning output dims
// d = t, t+WG, ... and accumulate p_j * V[j][d], so V rows are read coalesced.
// Semantics as attention.cl: Q [B,Hq,Lq,D], K [B,Hkv,Lk,D], V [B,Hkv,Lk,DV], any strides; GQA;
// CAUSAL (query i sees keys j <= Lk - Lq + i); MASK_KIND 0 none / 1 additive / 2 boolean;
// KEY_MASK a [B, Lk] key mask on top; a row that sees no key outputs zeros.
// Build defines: PRISM_DTYPE, D, DV, WG (power of two), CAUSAL, MASK_KIND, KEY_MASK (with KM_T).
// Validity: WG <= max work-group size; (D + 2*WG) * 4 bytes <= local memory.

#include "gemm_common.cl"  // dtype load/store macros (resolved by build_kernel)

#include "attention_common.cl"  // mask_t, MASK_VALUE

#define DV_PER ((DV + WG - 1) / WG)

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void attention_split(int Hq, int Hkv, int Lq, int Lk, float scale,
                     __global const GT* Q, long q_off, long4 sq, __global const GT* Kp, long k_off, long4 sk,
                     __global const GT* Vp, long v_off, long4 sv, __global GT* O, long o_off, long4 so,
                     __global const mask_t* Mk, long m_off, long4 sm, __global const km_t* Km, long km_off,
                     long skb, long skt) {
  __local float qs[D];
  __local float ps[WG];
  __local float red[WG];
  const int t = get_local_id(0);
  const int i = get_group_id(0);  // query row
  const int h = get_group_id(1);
  const long b = get_group_id(2);
  const int hk = h / (Hq / Hkv);
  Q += q_off + b * sq.s0 + h * sq.s1 + i * sq.s2;
  Kp += k_off + b * sk.s0 + hk * sk.s1;
  Vp += v_off + b * sv.s0 + hk * sv.s1;
#if MASK_KIND != 0
  Mk += m_off + b * sm.s0 + h * sm.s1 + i * sm.s2;
#endif
#if KEY_MASK
  Km += km_off + b * skb;
#endif
  for (int d = t; d < D; d += WG) qs[d] = PRISM_LOAD(Q + d * sq.s3) * scale;
#if CAUSAL
  const int end = min(Lk, Lk - Lq + i + 1);
#else
  const int end = Lk;
#endif
  float acc[DV_PER];
#pragma unroll
  for (int r = 0; r < DV_PER; ++r) acc[r] = 0.0f;
  float row_max = -INFINITY, row_sum = 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);

  for (int j0 = 0; j0 < end; j0 += WG) {
    const int j = j0 + t;
    float s = -INFINITY;
    if (j < end && KEY_OK(j)) {
      const __global GT* kr = Kp + (long)j * sk.s2;
      float dot = 0.0f;
      for (int d = 0; d < D; ++d) dot = fma(qs[d], PRISM_LOAD(kr + d * sk.s3), dot);
      s = dot;
#if MASK_KIND != 0
      s += MASK_VALUE(Mk + (long)j * sm.s3);
#endif
    }
    // Block max.
    red[t] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
      if (t < w) red[t] = fmax(red[t], red[t + w]);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float block_max = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (block_max == -INFINITY) continue;  // uniform: every key of the block is masked
    const float new_max = fmax(row_max, block_max);
    const float p = exp(s - new_max);
    ps[t] = p;
    red[t] = p;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = WG / 2; w > 0; w >>= 1) {
      if (t < w) red[t] += red[t + w];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float corr = exp(row_max - new_max);
    row_sum = row_sum * corr + red[0];
    row_max = new_max;
    const int nk = min(WG, end - j0);
#pragma unroll
    for (int r = 0; r < DV_PER; ++r) {
      const int d = t + r * WG;
      float a = acc[r] * corr;
      if (d < DV)
        for (int jj = 0; jj < nk; ++jj) a = fma(ps[jj], PRISM_LOAD(Vp + (long)(j0 + jj) * sv.s2 + d * sv.s3), a);
      acc[r] = a;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // ps/red are rewritten by the next block
  }

  const float inv = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
  __global GT* o = O + o_off + b * so.s0 + h * so.s1 + (long)i * so.s2;
#pragma unroll
  for (int r = 0; r < DV_PER; ++r) {
    const int d = t + r * WG;
    if (d < DV) PRISM_STORE(o + d * so.s3, acc[r] * inv);
  }
}
