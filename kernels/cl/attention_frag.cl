// SPDX-License-Identifier: Apache-2.0
// What the tensor-core attention kernels share (attention_mma.cl for f16/bf16, attention_tf32x3.cl
// for f32): K/V tiles staged in local memory, the online softmax on a warp's m16n8 score
// fragments, and the store of the output fragments. A warp owns 16 query rows; lane (g, t) =
// (lane / 4, lane % 4) holds rows g and g + 8 ("a" and "b") at columns 2t and 2t + 1 of each
// 8-wide n-tile (accumulator fragment c0 c1 / c2 c3).
// Needs gemm_common.cl (GT, PRISM_STORE), attention_common.cl (masks) and mma_common.cl first,
// and the defines D, DV, BN, NW, STAGES, CAUSAL, MASK_KIND, KEY_MASK; ATTN_EXP2 picks the
// exponential (native_exp2 where 16-bit rounding of the weights dwarfs its error, exp2 for f32).

#define NT (32 * NW)
#define EPV (16 / (int)sizeof(GT))              // elements per 16-byte chunk
#define KSW (D * (int)sizeof(GT) / 4 + 4)       // local row strides in 32-bit words, padded by 4 so
#define VSW (DV * (int)sizeof(GT) / 4 + 4)      // that 8 rows x 4 words hit 32 distinct banks
#define NTS (BN / 8)                            // score n-tiles a tile

inline float lane_xor(float x, int o) {
  float y;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x), "r"(o));
  return y;
}
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
// stride dst_words); rows at or past `valid` are zeros. With STAGES 2 through cp.async (the
// caller commits), else through registers.
inline void stage_rows(__local uint* dst, int dst_words, __global const GT* src, long src_stride, int rows,
                       int chunks, int valid, int lid) {
  for (int idx = lid; idx < rows * chunks; idx += NT) {
    const int r = idx / chunks, c = idx - r * chunks;
#if STAGES == 2
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

// Keys j0 .. j0 + BN - 1 of K and V into Kb and Vb (keys past Lk as zeros).
inline void stage_tile(__local uint* Kb, __local uint* Vb, __global const GT* Kp, long sk2, __global const GT* Vp,
                       long sv2, int j0, int Lk, int lid) {
  stage_rows(Kb, KSW, Kp + (long)j0 * sk2, sk2, BN, D / EPV, Lk - j0, lid);
  stage_rows(Vb, VSW, Vp + (long)j0 * sv2, sv2, BN, DV / EPV, Lk - j0, lid);
#if STAGES == 2
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// One tile's online softmax on the warp's score fragments s (raw Q K^T sums, keys
// j0 + 8n + 2t + {0, 1}): masks and scales them (a `full` tile, which every row sees whole and
// without masks, keeps raw scores: the scale, positive, goes into the exponent's fma), replaces
// them by the weights 2^(score - max), updates the running max m[] and this lane's share of the
// row sums l[] (rows a, b), and sets corr[] to the factor the accumulators are rescaled by.
inline void frag_softmax(float s[NTS][4], bool full, float sl2, int j0, int t, int row_a, int row_b, int end_a,
                         int end_b, __global const mask_t* Mk, long4 sm, __global const km_t* Km, long skt, float* m,
                         float* l, float* corr) {
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
  const float mn_a = fmax(m[0], quad_max(tm_a) * mul), mn_b = fmax(m[1], quad_max(tm_b) * mul);
  // Nothing seen yet (max -inf): weights 0, nothing to rescale.
  corr[0] = mn_a == -INFINITY ? 1.0f : ATTN_EXP2(m[0] - mn_a);
  corr[1] = mn_b == -INFINITY ? 1.0f : ATTN_EXP2(m[1] - mn_b);
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
  l[0] = l[0] * corr[0] + ps_a;
  l[1] = l[1] * corr[1] + ps_b;
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
