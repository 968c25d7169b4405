// SPDX-License-Identifier: Apache-2.0
// What the tensor-core attention kernels share (attention_mma.cl for f16/bf16, attention_tf32x3.cl
// for f32): the lane's rows, K/V tiles staged in local memory (one or two stages), the online
// softmax on a warp's m16n8 score fragments, and the store of the output fragments. A warp owns 16 query rows; lane (g, t) =
// (lane / 4, lane % 4) holds rows g and g + 8 ("a" and "b") at columns 2t and 2t + 1 of each
// 8-wide n-tile (accumulator fragment c0 c1 / c2 c3).
// Needs gemm_common.cl (GT, PRISM_STORE), attention_common.cl (masks) and mma_common.cl first,
// and the defines D, DV, BN, NW, STAGES, CAUSAL, MASK_KIND, KEY_MASK; ATTN_EXP2 picks the
// exponential (native_exp2 where 16-bit rounding of the weights dwarfs its error, exp2 for f32).
// CP_ASYNC (1 where the device has cp.async; STAGES 2 needs it) copies tiles without registers.
//
// A tile's life, with the three calls a kernel makes per tile (frag_tile_ready before Q K^T,
// frag_v_ready before P V, frag_tile_done after it):
// - STAGES 2: both tiles double-buffered; the next tile's copies run under this tile's math, one
//   barrier a tile.
// - STAGES 1 with CP_ASYNC (FlashAttention-2's order): one K and one V buffer; V's copy runs under
//   Q K^T and the softmax, the next K's under P V; two barriers a tile, and no math waits on a
//   copy it could have overlapped, in half the local memory of STAGES 2.
// - STAGES 1 without: copies through registers, then the math.

#define NT (32 * NW)
#define EPV (16 / (int)sizeof(GT))              // elements per 16-byte chunk
#define KSW (D * (int)sizeof(GT) / 4 + 4)       // local row strides in 32-bit words, padded by 4 so
#define VSW (DV * (int)sizeof(GT) / 4 + 4)      // that 8 rows x 4 words hit 32 distinct banks
#define NTS (BN / 8)                            // score n-tiles a tile
#define KQ (D * (int)sizeof(GT) / 32)           // k-steps of Q K^T (8 words of a row each)
#ifndef CP_ASYNC
#define CP_ASYNC (STAGES == 2)
#endif
#define ATTN_SLACK 8.0f  // see frag_softmax
#if STAGES == 2 && !CP_ASYNC
#error "STAGES 2 needs cp.async"
#endif

#include "lane_shfl.cl"  // lane_xor

// Max or sum over the 4 lanes holding a row (lanes 4g .. 4g + 3).
inline float quad_max(float x) {
  x = fmax(x, lane_xor(x, 1));
  return fmax(x, lane_xor(x, 2));
}
inline float quad_sum(float x) {
  x += lane_xor(x, 1);
  return x + lane_xor(x, 2);
}

// `rows` rows of `chunks` 16-byte chunks from src (row stride src_stride elements) to dst (row
// stride dst_words); rows at or past `valid` are zeros. Through cp.async where built (the caller
// commits), else through registers.
inline void stage_rows(__local uint* dst, int dst_words, __global const GT* src, long src_stride, int rows,
                       int chunks, int valid, int lid) {
  for (int idx = lid; idx < rows * chunks; idx += NT) {
    const int r = idx / chunks, c = idx - r * chunks;
#if CP_ASYNC
    __global const GT* p = src + (long)min(r, valid - 1) * src_stride + EPV * c;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(MMA_SMEM(dst + r * dst_words + 4 * c)),
                 "l"((ulong)p), "r"(r < valid ? 16 : 0)
                 : "memory");
#else
    const uint4 x = r < valid ? *(__global const uint4*)(src + (long)r * src_stride + EPV * c) : (uint4)(0);
    *(__local uint4*)(dst + r * dst_words + 4 * c) = x;
#endif
  }
}

// The work-group's query tile (the last one first: under CAUSAL the tiles with the most keys
// start first) as this lane sees it: rows ra and rb = ra + 8 of its warp, qa and qb the same
// clamped into range (rows past Lq compute and are not stored), end_a / end_b the keys each may
// see, loop_end the keys the work-group walks and first_end the fewest any of its rows sees.
typedef struct {
  int ra, rb, qa, qb, end_a, end_b, loop_end, first_end;
} frag_rows;

inline frag_rows frag_rows_of(int Lq, int Lk, int warp, int g) {
  const int tiles = (Lq + 16 * NW - 1) / (16 * NW);
  const int i0 = (tiles - 1 - (int)get_group_id(0)) * 16 * NW;
  frag_rows r;
  r.ra = i0 + 16 * warp + g;
  r.rb = r.ra + 8;
  r.qa = min(r.ra, Lq - 1);
  r.qb = min(r.rb, Lq - 1);
#if CAUSAL
  r.end_a = min(Lk, Lk - Lq + r.qa + 1);
  r.end_b = min(Lk, Lk - Lq + r.qb + 1);
  r.loop_end = min(Lk, Lk - Lq + min(i0 + 16 * NW - 1, Lq - 1) + 1);
  r.first_end = min(Lk, Lk - Lq + min(i0, Lq - 1) + 1);
#else
  r.end_a = r.end_b = r.loop_end = r.first_end = Lk;
#endif
  return r;
}

// The warp's Q rows as mma A fragments, in 32-bit words of a row (two 16-bit values or one f32):
// a0 (row a, word t), a1 (row b, t), a2 (row a, t + 4), a3 (row b, t + 4) of each 8-word k-step.
inline void frag_load_q(uint qf[KQ][4], __global const GT* Q, long sq2, frag_rows r, int t) {
  __global const uint* qa = (__global const uint*)(Q + (long)r.qa * sq2);
  __global const uint* qb = (__global const uint*)(Q + (long)r.qb * sq2);
#pragma unroll
  for (int kk = 0; kk < KQ; ++kk) {
    qf[kk][0] = qa[kk * 8 + t];
    qf[kk][1] = qb[kk * 8 + t];
    qf[kk][2] = qa[kk * 8 + t + 4];
    qf[kk][3] = qb[kk * 8 + t + 4];
  }
}

// Keys j0 .. j0 + BN - 1 of K (or V) into Kb (Vb), keys past Lk as zeros; cp.async copies are
// committed as one group.
inline void stage_k(__local uint* Kb, __global const GT* Kp, long sk2, int j0, int Lk, int lid) {
  stage_rows(Kb, KSW, Kp + (long)j0 * sk2, sk2, BN, D / EPV, Lk - j0, lid);
#if CP_ASYNC
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
inline void stage_v(__local uint* Vb, __global const GT* Vp, long sv2, int j0, int Lk, int lid) {
  stage_rows(Vb, VSW, Vp + (long)j0 * sv2, sv2, BN, DV / EPV, Lk - j0, lid);
#if CP_ASYNC
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
inline void cp_async_wait_all(void) {
#if CP_ASYNC
  asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}

// Makes the K tile at j0 (buffer buf; with STAGES 2 the V tile too) ready in local memory for
// every item, and starts the copies that run under the math to come (see the header).
inline void frag_tile_ready(__local uint (*Kbuf)[BN * KSW], __local uint (*Vbuf)[BN * VSW], int buf, int j0,
                            int loop_end, __global const GT* Kp, long sk2, __global const GT* Vp, long sv2, int Lk,
                            int lid) {
#if STAGES == 2
  if (j0 == 0) {
    stage_k(Kbuf[0], Kp, sk2, 0, Lk, lid);
    stage_v(Vbuf[0], Vp, sv2, 0, Lk, lid);
  }
  cp_async_wait_all();
  barrier(CLK_LOCAL_MEM_FENCE);  // this tile landed for all; every warp is done with the other buffer
  if (j0 + BN < loop_end) {
    stage_k(Kbuf[buf ^ 1], Kp, sk2, j0 + BN, Lk, lid);
    stage_v(Vbuf[buf ^ 1], Vp, sv2, j0 + BN, Lk, lid);
  }
#elif CP_ASYNC
  if (j0 == 0) stage_k(Kbuf[0], Kp, sk2, 0, Lk, lid);
  cp_async_wait_all();
  barrier(CLK_LOCAL_MEM_FENCE);  // K landed for all; every warp is done with the last tile's V
  stage_v(Vbuf[0], Vp, sv2, j0, Lk, lid);
#else
  stage_k(Kbuf[0], Kp, sk2, j0, Lk, lid);
  stage_v(Vbuf[0], Vp, sv2, j0, Lk, lid);
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
}
// Makes the V tile ready before P V (STAGES 1 with CP_ASYNC: and starts the next K tile's copy).
inline void frag_v_ready(__local uint (*Kbuf)[BN * KSW], int j0, int loop_end, __global const GT* Kp, long sk2,
                         int Lk, int lid) {
#if STAGES == 1 && CP_ASYNC
  cp_async_wait_all();
  barrier(CLK_LOCAL_MEM_FENCE);  // V landed for all; every warp is done with this K tile
  if (j0 + BN < loop_end) stage_k(Kbuf[0], Kp, sk2, j0 + BN, Lk, lid);
#endif
}
inline void frag_tile_done(void) {
#if STAGES == 1 && !CP_ASYNC
  barrier(CLK_LOCAL_MEM_FENCE);  // the next tile's copies overwrite what was read here
#endif
}

// One tile's online softmax on the warp's score fragments s (raw Q K^T sums, keys
// j0 + 8n + 2t + {0, 1}): masks and scales them (a tile every row sees whole and without masks
// keeps raw scores: the scale, positive, goes into the exponent's fma), replaces them by the
// weights 2^(score - max), updates the running max m[] and this lane's share of the row sums l[]
// (rows a, b), and rescales the output fragments o by the change of the max.
inline void frag_softmax(float s[NTS][4], float o[DV / 8][4], frag_rows r, float sl2, int j0, int t,
                         __global const mask_t* Mk, long4 sm, __global const km_t* Km, long skt, float* m, float* l) {
#if MASK_KIND == 0 && !KEY_MASK
  const bool full = j0 + BN <= r.first_end;
#else
  const bool full = false;
#endif
  const int row_a = r.qa, row_b = r.qb, end_a = r.end_a, end_b = r.end_b;
  if (!full) {
#pragma unroll
    for (int n = 0; n < NTS; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = j0 + n * 8 + 2 * t + (e & 1);
        const int row = e < 2 ? row_a : row_b;
        float v = -INFINITY;
        if (j < (e < 2 ? end_a : end_b) && KEY_OK(j)) {
          v = s[n][e] * sl2;
#if MASK_KIND != 0
          v += MASK_VALUE(Mk + (long)row * sm.s2 + (long)j * sm.s3) * M_LOG2E_F;
#endif
        }
        s[n][e] = v;
      }
  }
  const float mul = full ? sl2 : 1.0f;
  float tm_a = -INFINITY, tm_b = -INFINITY;
#pragma unroll
  for (int n = 0; n < NTS; ++n) {
    tm_a = fmax(tm_a, fmax(s[n][0], s[n][1]));
    tm_b = fmax(tm_b, fmax(s[n][2], s[n][3]));
  }
  // The reference max moves only when the tile's max passes it by more than ATTN_SLACK (log2
  // units; FlashAttention-4's lazy rescale): weights stay <= 2^ATTN_SLACK, far inside f32 and the
  // 16-bit dtypes' range, and the result is the same (every weight and the row sum share the
  // reference), while most tiles after the first skip the accumulators' rescale.
  const float tx_a = quad_max(tm_a) * mul, tx_b = quad_max(tm_b) * mul;
  const float mn_a = tx_a > m[0] + ATTN_SLACK ? tx_a : m[0], mn_b = tx_b > m[1] + ATTN_SLACK ? tx_b : m[1];
  // Nothing seen yet (max -inf): weights 0, nothing to rescale.
  const float c_a = mn_a == m[0] ? 1.0f : ATTN_EXP2(m[0] - mn_a);
  const float c_b = mn_b == m[1] ? 1.0f : ATTN_EXP2(m[1] - mn_b);
  const float sub_a = mn_a == -INFINITY ? 0.0f : mn_a, sub_b = mn_b == -INFINITY ? 0.0f : mn_b;
  m[0] = mn_a;
  m[1] = mn_b;
  float ps_a = 0.0f, ps_b = 0.0f;
#pragma unroll
  for (int n = 0; n < NTS; ++n) {
    s[n][0] = ATTN_EXP2(fma(s[n][0], mul, -sub_a));  // 2^-inf = 0
    s[n][1] = ATTN_EXP2(fma(s[n][1], mul, -sub_a));
    s[n][2] = ATTN_EXP2(fma(s[n][2], mul, -sub_b));
    s[n][3] = ATTN_EXP2(fma(s[n][3], mul, -sub_b));
    ps_a += s[n][0] + s[n][1];
    ps_b += s[n][2] + s[n][3];
  }
  l[0] = l[0] * c_a + ps_a;
  l[1] = l[1] * c_b + ps_b;
  if (c_a != 1.0f || c_b != 1.0f) {
#pragma unroll
    for (int n = 0; n < DV / 8; ++n) {
      o[n][0] *= c_a;
      o[n][1] *= c_a;
      o[n][2] *= c_b;
      o[n][3] *= c_b;
    }
  }
}

// The output fragments o[DV / 8] of rows ra and rb (stored when inside Lq), divided by the row
// sums met across each row's 4 lanes.
inline void frag_store(float o[DV / 8][4], const float* l, __global GT* oa, __global GT* ob, long s3, bool a_in,
                       bool b_in, int t) {
  const float sa = quad_sum(l[0]), sb = quad_sum(l[1]);
  const float inv_a = sa > 0.0f ? 1.0f / sa : 0.0f, inv_b = sb > 0.0f ? 1.0f / sb : 0.0f;
#pragma unroll
  for (int n = 0; n < DV / 8; ++n) {
    const int d0 = n * 8 + 2 * t;
    if (a_in) {
      PRISM_STORE(oa + d0 * s3, o[n][0] * inv_a);
      PRISM_STORE(oa + (d0 + 1) * s3, o[n][1] * inv_a);
    }
    if (b_in) {
      PRISM_STORE(ob + d0 * s3, o[n][2] * inv_b);
      PRISM_STORE(ob + (d0 + 1) * s3, o[n][3] * inv_b);
    }
  }
}
