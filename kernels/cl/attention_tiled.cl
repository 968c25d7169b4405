// SPDX-License-Identifier: Apache-2.0
// prism scaled-dot-product attention for GPUs, tiled flash attention (FlashAttention-2's loop
// order on SIMT cores): one work-group of 128 items owns BM query rows of one (batch, head) and
// walks the keys they may see in tiles of BN. Per tile:
//   1. the K and V tiles are staged in local memory (float, rows padded by 4 floats so that the
//      8 rows a quarter-warp reads sit in different banks);
//   2. scores: item (rg, kg) = (lid / 8, lid % 8) computes rows rg*TM .. rg*TM+TM-1 against keys
//      kg, kg+8, ... of the tile (TM x TN register tile), q read from global memory (cached: the
//      same BM rows serve every tile) and k from local memory, both 4 dims per load;
//   3. online softmax: the tile's row max across the 8 items of a row group (inline-PTX
//      shfl.sync.bfly where the driver builds it, LANE_SHFL=1; local memory elsewhere), the
//      rescale of the running sums, p = 2^(s - max) written to a local BM x BN tile;
//   4. the accumulator: item (rg, dg) holds rows rg*TM.. and output dims 4*(dg + 8c) .. +3
//      (c < NC), so a quarter-warp reads one contiguous 128-byte span of a V row.
// Scores are kept in log2 units (scale * log2(e) folded into the dot product), so each weight is
// one exp2. Work-group 0 takes the last query tile: under CAUSAL the tiles with the most keys
// start first.
// Q [B,Hq,Lq,D], K [B,Hkv,Lk,D], V [B,Hkv,Lk,DV] with unit head-dim stride (any other strides,
// in elements); O [B,Hq,Lq,DV], any strides. Query head h reads kv head h / (Hq / Hkv). CAUSAL,
// MASK_KIND, KEY_MASK as in attention.cl (attention_common.cl); a row that sees no key outputs
// zeros.
// Build defines: PRISM_DTYPE, D, DV (multiples of 4), BM (16, 32, 64), BN (8, 16, 32), CAUSAL,
// MASK_KIND, KEY_MASK (with KM_T), LANE_SHFL.
// Local memory: 4 * (BN * (D + 4 + DV + 4) + BM * (BN + 4) + (LANE_SHFL ? 0 : BM * 8)) bytes.

#define VW 4
#include "gemm_common.cl"  // dtype loads (PRISM_LOADV: 4 elements as a float4), stores

#include "attention_common.cl"  // mask_t, MASK_VALUE, KEY_OK

#define NT 128          // work-items: 16 row groups x 8 key / output-dim groups
#define TM (BM / 16)    // query rows per work-item
#define TN (BN / 8)     // keys per work-item per tile
#define D4 (D / 4)
#define DV4 (DV / 4)
#define NC ((DV4 + 7) / 8)  // float4 output chunks per work-item (the last may be partial)
#define dg_ok(d4) ((d4) < DV4)  // output chunk d4 lies inside the value row
#define KS (D + 4)          // local row strides, in floats
#define VS (DV + 4)
#define PS (BN + 4)

#if LANE_SHFL
#include "lane_shfl.cl"  // lane_xor
#endif

// The max (is_max) or sum of x over the 8 consecutive items of a row group, in each of them.
// All items call it together (the local-memory pass has a barrier); `slot` is the caller's row
// within the work-group's BM.
inline float group8_reduce(float x, __local float* red, int slot, int kg, bool is_max) {
#if LANE_SHFL
  for (int o = 1; o < 8; o <<= 1) {
    const float y = lane_xor(x, o);
    x = is_max ? fmax(x, y) : x + y;
  }
  return x;
#else
  red[slot * 8 + kg] = x;
  barrier(CLK_LOCAL_MEM_FENCE);
  float r = red[slot * 8];
  for (int i = 1; i < 8; ++i) r = is_max ? fmax(r, red[slot * 8 + i]) : r + red[slot * 8 + i];
  barrier(CLK_LOCAL_MEM_FENCE);  // red is rewritten by the next call
  return r;
#endif
}

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attention_tiled(int Hq, int Hkv, int Lq, int Lk, float scale,
                     __global const GT* restrict Q, long q_off, long4 sq, __global const GT* restrict Kp,
                     long k_off, long4 sk, __global const GT* restrict Vp, long v_off, long4 sv,
                     __global GT* O, long o_off, long4 so, __global const mask_t* Mk, long m_off, long4 sm,
                     __global const km_t* Km, long km_off, long skb, long skt) {
  __local float Ks[BN * KS];
  __local float Vs[BN * VS];
  __local float Ps[BM * PS];
#if LANE_SHFL
  __local float* red = 0;
#else
  __local float red[BM * 8];
#endif
  const int lid = get_local_id(0);
  const int rg = lid / 8, kg = lid % 8;
  const int tiles = (Lq + BM - 1) / BM;
  const int i0 = (tiles - 1 - (int)get_group_id(0)) * BM;  // the last query tile first
  const int h = get_global_id(1);
  const long b = get_global_id(2);
  const int hk = h / (Hq / Hkv);
  const float sl2 = scale * M_LOG2E_F;

  ATTN_SEEK(b, h, hk);

  // This item's rows (clamped into range: rows past Lq compute and are not stored) and the
  // keys each may see.
  int row[TM], end[TM];
  float m[TM], l[TM];
  float4 acc[TM][NC];
#pragma unroll
  for (int r = 0; r < TM; ++r) {
    row[r] = min(i0 + rg * TM + r, Lq - 1);
#if CAUSAL
    end[r] = min(Lk, Lk - Lq + row[r] + 1);
#else
    end[r] = Lk;
#endif
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[r][c] = (float4)(0.0f);
  }
#if CAUSAL
  const int loop_end = min(Lk, Lk - Lq + min(i0 + BM - 1, Lq - 1) + 1);
#else
  const int loop_end = Lk;
#endif

  for (int j0 = 0; j0 < loop_end; j0 += BN) {
    // 1. Stage the tile (keys past Lk read as zeros: their weights are 0 and 0 * 0 stays 0).
    for (int idx = lid; idx < BN * D4; idx += NT) {
      const int jj = idx / D4, c = idx - jj * D4;
      const float4 x = j0 + jj < Lk ? PRISM_LOADV(Kp + (long)(j0 + jj) * sk.s2 + 4 * c) : (float4)(0.0f);
      vstore4(x, 0, Ks + jj * KS + 4 * c);
    }
    for (int idx = lid; idx < BN * DV4; idx += NT) {
      const int jj = idx / DV4, c = idx - jj * DV4;
      const float4 x = j0 + jj < Lk ? PRISM_LOADV(Vp + (long)(j0 + jj) * sv.s2 + 4 * c) : (float4)(0.0f);
      vstore4(x, 0, Vs + jj * VS + 4 * c);
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    // 2. Scores.
    float s[TM][TN];
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
      for (int t = 0; t < TN; ++t) s[r][t] = 0.0f;
    for (int c = 0; c < D4; ++c) {
      float4 qv[TM];
#pragma unroll
      for (int r = 0; r < TM; ++r) qv[r] = PRISM_LOADV(Q + (long)row[r] * sq.s2 + 4 * c);
#pragma unroll
      for (int t = 0; t < TN; ++t) {
        const float4 kv = vload4(0, Ks + (kg + 8 * t) * KS + 4 * c);
#pragma unroll
        for (int r = 0; r < TM; ++r)
          s[r][t] = fma(qv[r].s0, kv.s0, fma(qv[r].s1, kv.s1, fma(qv[r].s2, kv.s2, fma(qv[r].s3, kv.s3, s[r][t]))));
      }
    }

    // 3. Online softmax over the tile.
    float corr[TM];
#pragma unroll
    for (int r = 0; r < TM; ++r) {
      float tmax = -INFINITY;
#pragma unroll
      for (int t = 0; t < TN; ++t) {
        const int j = j0 + kg + 8 * t;
        float v = -INFINITY;
        if (j < end[r] && KEY_OK(j)) {
          v = s[r][t] * sl2;
#if MASK_KIND != 0
          v += MASK_VALUE(Mk + (long)row[r] * sm.s2 + (long)j * sm.s3) * M_LOG2E_F;
#endif
        }
        s[r][t] = v;
        tmax = fmax(tmax, v);
      }
      tmax = group8_reduce(tmax, red, rg * TM + r, kg, true);
      const float mnew = fmax(m[r], tmax);
      // Nothing seen yet (mnew = -inf): weights 0, nothing to rescale.
      corr[r] = mnew == -INFINITY ? 1.0f : exp2(m[r] - mnew);
      m[r] = mnew;
      float psum = 0.0f;
#pragma unroll
      for (int t = 0; t < TN; ++t) {
        const float p = mnew == -INFINITY ? 0.0f : exp2(s[r][t] - mnew);
        psum += p;
        Ps[(rg * TM + r) * PS + kg + 8 * t] = p;
      }
      l[r] = l[r] * corr[r] + psum;  // this item's share of the row sum
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    // 4. acc = acc * corr + P @ V.
#pragma unroll
    for (int r = 0; r < TM; ++r)
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[r][c] *= corr[r];
    for (int jj = 0; jj < BN; jj += 4) {
      float pr[TM][4];
#pragma unroll
      for (int r = 0; r < TM; ++r) vstore4(vload4(0, Ps + (rg * TM + r) * PS + jj), 0, pr[r]);
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          if (dg_ok(kg + 8 * c)) {
            const float4 vv = vload4(0, Vs + (jj + u) * VS + 4 * (kg + 8 * c));
#pragma unroll
            for (int r = 0; r < TM; ++r) acc[r][c] = fma((float4)(pr[r][u]), vv, acc[r][c]);
          }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the next tile overwrites Ks, Vs and Ps
  }

  // The row sums meet across the row group; rows past Lq are not stored.
#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const float sum = group8_reduce(l[r], red, rg * TM + r, kg, false);
    const int i = i0 + rg * TM + r;
    if (i >= Lq) continue;
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    __global GT* o = O + o_off + b * so.s0 + h * so.s1 + (long)i * so.s2;
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      const int d4 = kg + 8 * c;
      if (!dg_ok(d4)) continue;
      const float4 y = acc[r][c] * inv;
      PRISM_STORE(o + (4 * d4 + 0) * so.s3, y.s0);
      PRISM_STORE(o + (4 * d4 + 1) * so.s3, y.s1);
      PRISM_STORE(o + (4 * d4 + 2) * so.s3, y.s2);
      PRISM_STORE(o + (4 * d4 + 3) * so.s3, y.s3);
    }
  }
}
