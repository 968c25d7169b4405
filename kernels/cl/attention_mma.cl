// SPDX-License-Identifier: Apache-2.0
// prism scaled-dot-product attention on NVIDIA tensor cores (FlashAttention-2's scheme through
// inline PTX, sm_80+), for f16 and bf16 storage with f32 accumulation. A work-group of NW warps
// owns 16 * NW query rows of one (batch, head); warp w owns rows 16w .. 16w + 15 and keeps them
// as mma A fragments in registers for the whole kernel. Per tile of BN keys:
//   1. the K and V tiles are staged in local memory as they lie in global memory (16-byte loads;
//      rows padded by 4 words, so fragment reads of 8 rows x 4 words hit 32 distinct banks);
//   2. S = Q K^T: m16n8k16 mma, K read as the col-major B operand (a K row is an n column) by
//      ldmatrix;
//   3. online softmax on the accumulator fragments: a row's max and sum across the 4 lanes that
//      hold it (shfl.sync.bfly); scores in log2 units (scale * log2(e) folded in), one ex2.approx
//      each (native_exp2: its error is far below the weights' rounding to 16 bits);
//   4. O += P V: the weights, rounded to the storage dtype, become A fragments in registers (an
//      m16n8 accumulator pair is an m16k16 A fragment), V's B fragments come from ldmatrix.trans
//      of the row-major V tile.
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"), g = lane / 4, t = lane % 4,
// in 32-bit words (two 16-bit values) of a k-row: a0 (g, t), a1 (g+8, t), a2 (g, t+4),
// a3 (g+8, t+4); b0 (n=g, t), b1 (n=g, t+4); c0 c1 (g, 2t, 2t+1), c2 c3 (g+8, 2t, 2t+1).
// Work-group 0 takes the last query tile: under CAUSAL the tiles with the most keys start first.
// Q [B,Hq,Lq,D], K [B,Hkv,Lk,D], V [B,Hkv,Lk,DV]: unit head-dim stride, the other strides and the
// offsets multiples of 8 elements (16-byte rows); O [B,Hq,Lq,DV], any strides. Query head h reads
// kv head h / (Hq / Hkv). CAUSAL, MASK_KIND, KEY_MASK as in attention.cl; a row that sees no key
// outputs zeros.
// STAGES 2 double-buffers the tiles: the next tile's cp.async copies run while this one's math
// does (STAGES 1: 16-byte loads through registers, then the math).
// Build defines: PRISM_DTYPE (1 f16, 2 bf16), D, DV (multiples of 16), NW (warps), BN (16, 32,
// 64), STAGES (1, 2), CAUSAL, MASK_KIND, KEY_MASK (with KM_T).
// Local memory: 4 * STAGES * BN * (D / 2 + 4 + DV / 2 + 4) bytes.

#include "gemm_common.cl"  // GT, PRISM_LOAD / PRISM_STORE

#include "attention_common.cl"  // mask_t, MASK_VALUE, KEY_OK

#define NT (32 * NW)
#define KSW (D / 2 + 4)   // padded local row strides, in 32-bit words
#define VSW (DV / 2 + 4)
#define KQ (D / 16)       // k-steps of Q K^T
#define NTS (BN / 8)      // score n-tiles
#define KP (BN / 16)      // k-steps of P V
#define NTO (DV / 8)      // output n-tiles

inline void mma16(float* c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
#if PRISM_DTYPE == 1
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// Two f32 values rounded to nearest even into one word of the storage dtype, lo in the low half.
inline uint pack2(float lo, float hi) {
  uint r;
#if PRISM_DTYPE == 1
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

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

#if STAGES == 2
// 16 bytes global -> local without registers; src_bytes 0 fills zeros (keys past Lk).
inline void cp16(__local uint* dst, __global const GT* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint)(size_t)dst), "l"((ulong)src),
               "r"(src_bytes)
               : "memory");
}
#endif

// Stage keys j0 .. j0 + BN - 1 of K and V into Kb and Vb (keys past Lk as zeros).
inline void stage_tile(__local uint* Kb, __local uint* Vb, __global const GT* Kp, long sk2, __global const GT* Vp,
                       long sv2, int j0, int Lk, int lid) {
  for (int idx = lid; idx < BN * (D / 8); idx += NT) {
    const int jj = idx / (D / 8), c = idx - jj * (D / 8);
#if STAGES == 2
    cp16(Kb + jj * KSW + 4 * c, Kp + (long)min(j0 + jj, Lk - 1) * sk2 + 8 * c, j0 + jj < Lk ? 16 : 0);
#else
    const uint4 x = j0 + jj < Lk ? *(__global const uint4*)(Kp + (long)(j0 + jj) * sk2 + 8 * c) : (uint4)(0);
    *(__local uint4*)(Kb + jj * KSW + 4 * c) = x;
#endif
  }
  for (int idx = lid; idx < BN * (DV / 8); idx += NT) {
    const int jj = idx / (DV / 8), c = idx - jj * (DV / 8);
#if STAGES == 2
    cp16(Vb + jj * VSW + 4 * c, Vp + (long)min(j0 + jj, Lk - 1) * sv2 + 8 * c, j0 + jj < Lk ? 16 : 0);
#else
    const uint4 x = j0 + jj < Lk ? *(__global const uint4*)(Vp + (long)(j0 + jj) * sv2 + 8 * c) : (uint4)(0);
    *(__local uint4*)(Vb + jj * VSW + 4 * c) = x;
#endif
  }
#if STAGES == 2
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attention_mma(int Hq, int Hkv, int Lq, int Lk, float scale,
                   __global const GT* restrict Q, long q_off, long4 sq, __global const GT* restrict Kp,
                   long k_off, long4 sk, __global const GT* restrict Vp, long v_off, long4 sv,
                   __global GT* O, long o_off, long4 so, __global const mask_t* Mk, long m_off, long4 sm,
                   __global const km_t* Km, long km_off, long skb, long skt) {
  __local uint Kbuf[STAGES][BN * KSW] __attribute__((aligned(16)));
  __local uint Vbuf[STAGES][BN * VSW] __attribute__((aligned(16)));
  const int lid = get_local_id(0);
  const int lane = lid % 32, warp = lid / 32;
  const int g = lane / 4, t = lane % 4;
  const int tiles = (Lq + 16 * NW - 1) / (16 * NW);
  const int i0 = (tiles - 1 - (int)get_group_id(0)) * 16 * NW;  // the last query tile first
  const int h = get_global_id(1);
  const long b = get_global_id(2);
  const int hk = h / (Hq / Hkv);
  const float sl2 = scale * M_LOG2E_F;

  Q += q_off + b * sq.s0 + h * sq.s1;
  Kp += k_off + b * sk.s0 + hk * sk.s1;
  Vp += v_off + b * sv.s0 + hk * sv.s1;
#if MASK_KIND != 0
  Mk += m_off + b * sm.s0 + h * sm.s1;
#endif
#if KEY_MASK
  Km += km_off + b * skb;
#endif

  // This lane's two rows (g and g + 8 of the warp's 16; clamped: rows past Lq are not stored),
  // the keys each may see, and the warp's Q fragments.
  const int ra = i0 + 16 * warp + g, rb = ra + 8;
  const int qa_row = min(ra, Lq - 1), qb_row = min(rb, Lq - 1);
#if CAUSAL
  const int end_a = min(Lk, Lk - Lq + qa_row + 1), end_b = min(Lk, Lk - Lq + qb_row + 1);
#else
  const int end_a = Lk, end_b = Lk;
#endif
  uint qf[KQ][4];
  {
    __global const uint* qa = (__global const uint*)(Q + (long)qa_row * sq.s2);
    __global const uint* qb = (__global const uint*)(Q + (long)qb_row * sq.s2);
#pragma unroll
    for (int kk = 0; kk < KQ; ++kk) {
      qf[kk][0] = qa[kk * 8 + t];
      qf[kk][1] = qb[kk * 8 + t];
      qf[kk][2] = qa[kk * 8 + t + 4];
      qf[kk][3] = qb[kk * 8 + t + 4];
    }
  }
  float o[NTO][4];
#pragma unroll
  for (int n = 0; n < NTO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

#if CAUSAL
  const int loop_end = min(Lk, Lk - Lq + min(i0 + 16 * NW - 1, Lq - 1) + 1);
  const int first_end = min(Lk, Lk - Lq + min(i0, Lq - 1) + 1);  // the fewest keys a row here sees
#else
  const int loop_end = Lk, first_end = Lk;
#endif

#if STAGES == 2
  if (loop_end > 0) stage_tile(Kbuf[0], Vbuf[0], Kp, sk.s2, Vp, sv.s2, 0, Lk, lid);
#endif
  for (int j0 = 0, buf = 0; j0 < loop_end; j0 += BN, buf ^= STAGES - 1) {
    __local const uint* Ks = Kbuf[buf];
    __local const uint* Vs = Vbuf[buf];
#if STAGES == 2
    // This tile's copies (issued last iteration) landed for every item, and every warp is past
    // the last iteration's reads of the other buffer: one barrier, then the next tile's copies go
    // out to run under this tile's math.
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    barrier(CLK_LOCAL_MEM_FENCE);
    if (j0 + BN < loop_end) stage_tile(Kbuf[buf ^ 1], Vbuf[buf ^ 1], Kp, sk.s2, Vp, sv.s2, j0 + BN, Lk, lid);
#else
    stage_tile(Kbuf[0], Vbuf[0], Kp, sk.s2, Vp, sv.s2, j0, Lk, lid);
    barrier(CLK_LOCAL_MEM_FENCE);
#endif

    // 2. S = Q K^T for the warp's 16 rows and the tile's BN keys.
    // Two n-tiles per ldmatrix.x4: lane l addresses row l % 8 of matrix l / 8 = (keys +0 / +8,
    // dims +0 / +8), so registers 0, 1 are the first n-tile's b0, b1 and 2, 3 the second's.
    float s[NTS][4];
    const int mat = lane / 8;
#pragma unroll
    for (int n = 0; n < NTS; n += 2) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      s[n + 1][0] = s[n + 1][1] = s[n + 1][2] = s[n + 1][3] = 0.0f;
      const uint kbase = (uint)(size_t)(Ks + (n * 8 + (mat >> 1) * 8 + lane % 8) * KSW + (mat & 1) * 4);
#pragma unroll
      for (int kk = 0; kk < KQ; ++kk) {
        uint b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                     : "r"(kbase + kk * 32));  // 16 dims = 8 words = 32 bytes further
        mma16(s[n], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b0, b1);
        mma16(s[n + 1], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b2, b3);
      }
    }

    // 3. Online softmax. Keys a row may not see score -inf; a tile every row sees in full skips
    // the checks.
#if MASK_KIND == 0 && !KEY_MASK
    const bool full = j0 + BN <= first_end;
#else
    const bool full = false;
#endif
    // A full tile keeps raw scores (the scale is folded into the exponent's fma below: scale > 0,
    // so the max commutes with it); the others are scaled and masked here.
    if (!full) {
#pragma unroll
      for (int n = 0; n < NTS; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = j0 + n * 8 + 2 * t + (e & 1);
          const int row = e < 2 ? qa_row : qb_row;
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
    const float mn_a = fmax(m_a, quad_max(tm_a) * mul), mn_b = fmax(m_b, quad_max(tm_b) * mul);
    // Nothing seen yet (max -inf): weights 0, nothing to rescale.
    const float c_a = mn_a == -INFINITY ? 1.0f : native_exp2(m_a - mn_a);
    const float c_b = mn_b == -INFINITY ? 1.0f : native_exp2(m_b - mn_b);
    const float sub_a = mn_a == -INFINITY ? 0.0f : mn_a, sub_b = mn_b == -INFINITY ? 0.0f : mn_b;
    m_a = mn_a;
    m_b = mn_b;
    float ps_a = 0.0f, ps_b = 0.0f;
#pragma unroll
    for (int n = 0; n < NTS; ++n) {
      s[n][0] = native_exp2(fma(s[n][0], mul, -sub_a));  // ex2.approx; 2^-inf = 0
      s[n][1] = native_exp2(fma(s[n][1], mul, -sub_a));
      s[n][2] = native_exp2(fma(s[n][2], mul, -sub_b));
      s[n][3] = native_exp2(fma(s[n][3], mul, -sub_b));
      ps_a += s[n][0] + s[n][1];
      ps_b += s[n][2] + s[n][3];
    }
    l_a = l_a * c_a + ps_a;  // this lane's share of the row sums
    l_b = l_b * c_b + ps_b;

    // 4. O = O * corr + P V.
#pragma unroll
    for (int n = 0; n < NTO; ++n) {
      o[n][0] *= c_a;
      o[n][1] *= c_a;
      o[n][2] *= c_b;
      o[n][3] *= c_b;
    }
#pragma unroll
    for (int kk = 0; kk < KP; ++kk) {
      const uint a0 = pack2(s[2 * kk][0], s[2 * kk][1]), a1 = pack2(s[2 * kk][2], s[2 * kk][3]);
      const uint a2 = pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), a3 = pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      // ldmatrix.x4.trans: lane l addresses row l % 8 of matrix l / 8 = (keys +0 / +8, dims +0 / +8).
      const uint base =
          (uint)(size_t)(Vs + (kk * 16 + (mat & 1) * 8 + lane % 8) * VSW + (mat >> 1) * 4);
#pragma unroll
      for (int np = 0; np < NTO / 2; ++np) {
        uint b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                     : "r"(base + np * 32));  // 16 dims = 8 words = 32 bytes further
        mma16(o[2 * np], a0, a1, a2, a3, b0, b1);
        mma16(o[2 * np + 1], a0, a1, a2, a3, b2, b3);
      }
    }
#if STAGES == 1
    barrier(CLK_LOCAL_MEM_FENCE);  // the next stage_tile overwrites what was read here
#endif
  }

  // The row sums meet across the 4 lanes of a row; rows past Lq are not stored.
  const float sa = quad_sum(l_a), sb = quad_sum(l_b);
  const float inv_a = sa > 0.0f ? 1.0f / sa : 0.0f, inv_b = sb > 0.0f ? 1.0f / sb : 0.0f;
  __global GT* oa = O + o_off + b * so.s0 + h * so.s1 + (long)ra * so.s2;
  __global GT* ob = O + o_off + b * so.s0 + h * so.s1 + (long)rb * so.s2;
#pragma unroll
  for (int n = 0; n < NTO; ++n) {
    const int d0 = n * 8 + 2 * t;
    if (ra < Lq) {
      PRISM_STORE(oa + d0 * so.s3, o[n][0] * inv_a);
      PRISM_STORE(oa + (d0 + 1) * so.s3, o[n][1] * inv_a);
    }
    if (rb < Lq) {
      PRISM_STORE(ob + d0 * so.s3, o[n][2] * inv_b);
      PRISM_STORE(ob + (d0 + 1) * so.s3, o[n][3] * inv_b);
    }
  }
}
