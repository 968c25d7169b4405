// SPDX-License-Identifier: Apache-2.0
// prism scaled-dot-product attention on NVIDIA tensor cores (FlashAttention-2's scheme through
// inline PTX, sm_80+), for f16 and bf16 storage with f32 accumulation. A work-group of NW warps
// owns 16 * NW query rows of one (batch, head); warp w owns rows 16w .. 16w + 15 and keeps them
// as mma A fragments in registers for the whole kernel. Per tile of BN keys:
//   1. the K and V tiles are staged in local memory as they lie in global memory (16-byte copies;
//      rows padded by 4 words, so fragment reads of 8 rows x 4 words hit 32 distinct banks);
//   2. S = Q K^T: m16n8k16 mma, K read as the col-major B operand (a K row is an n column) by
//      ldmatrix;
//   3. online softmax on the accumulator fragments: a row's max and sum across the 4 lanes that
//      hold it (shfl.sync.bfly); scores in log2 units (scale * log2(e) folded in), one ex2.approx
//      each (native_exp2: its error is far below the weights' rounding to 16 bits); the
//      accumulators are rescaled only when a row's max grows by more than 2^8;
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
// STAGES 2 double-buffers the tiles (the next tile's cp.async copies run under this one's math);
// STAGES 1 with CP_ASYNC has one K and one V buffer, V's copy running under Q K^T and the next
// K's under P V (FlashAttention-2's order, attention_frag.cl), which fits 64-key tiles.
// Build defines: PRISM_DTYPE (1 f16, 2 bf16), D, DV (multiples of 16), NW (warps), BN (16, 32,
// 64), STAGES (1, 2), CP_ASYNC, CAUSAL, MASK_KIND, KEY_MASK (with KM_T).
// Local memory: 4 * STAGES * BN * (D / 2 + 4 + DV / 2 + 4) bytes.

#include "gemm_common.cl"  // GT, PRISM_LOAD / PRISM_STORE

#include "attention_common.cl"  // mask_t, MASK_VALUE, KEY_OK

#include "mma_common.cl"  // mma_tile (f16 / bf16), MMA_SMEM

#define ATTN_EXP2 native_exp2  // ex2.approx: its error is far below the weights' 16-bit rounding
#include "attention_frag.cl"  // NT, KSW, VSW, NTS, quad_max / quad_sum, tile staging, frag_softmax, frag_store

#define KP (BN / 16)  // k-steps of P V
#define NTO (DV / 8)  // output n-tiles

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
  const int h = get_global_id(1);
  const long b = get_global_id(2);
  const int hk = h / (Hq / Hkv);
  const float sl2 = scale * M_LOG2E_F;

  ATTN_SEEK(b, h, hk);

  // This lane's two rows (g and g + 8 of the warp's 16; clamped: rows past Lq are not stored),
  // the keys each may see, and the warp's Q fragments.
  const frag_rows r = frag_rows_of(Lq, Lk, warp, g);
  uint qf[KQ][4];
  frag_load_q(qf, Q, sq.s2, r, t);
  float o[NTO][4];
#pragma unroll
  for (int n = 0; n < NTO; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // running max and sum, rows a and b

  for (int j0 = 0, buf = 0; j0 < r.loop_end; j0 += BN, buf ^= STAGES - 1) {
    // 1. The tile in local memory.
    frag_tile_ready(Kbuf, Vbuf, buf, j0, r.loop_end, Kp, sk.s2, Vp, sv.s2, Lk, lid);
    __local const uint* Ks = Kbuf[buf];
    __local const uint* Vs = Vbuf[buf];

    // 2. S = Q K^T for the warp's 16 rows and the tile's BN keys.
    // Two n-tiles per ldmatrix.x4: lane l addresses row l % 8 of matrix l / 8 = (keys +0 / +8,
    // dims +0 / +8), so registers 0, 1 are the first n-tile's b0, b1 and 2, 3 the second's.
    float s[NTS][4];
    const int mat = lane / 8;
#pragma unroll
    for (int n = 0; n < NTS; n += 2) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      s[n + 1][0] = s[n + 1][1] = s[n + 1][2] = s[n + 1][3] = 0.0f;
      const uint kbase = MMA_SMEM(Ks + (n * 8 + (mat >> 1) * 8 + lane % 8) * KSW + (mat & 1) * 4);
#pragma unroll
      for (int kk = 0; kk < KQ; ++kk) {
        uint b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                     : "r"(kbase + kk * 32));  // 16 dims = 8 words = 32 bytes further
        mma_tile(s[n], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b0, b1);
        mma_tile(s[n + 1], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b2, b3);
      }
    }

    // 3. Online softmax (attention_frag.cl).
    frag_softmax(s, o, r, sl2, j0, t, Mk, sm, Km, skt, m, l);

    frag_v_ready(Kbuf, j0, r.loop_end, Kp, sk.s2, Lk, lid);
    // 4. O += P V (frag_softmax rescaled O for the new max).
#pragma unroll
    for (int kk = 0; kk < KP; ++kk) {
      const uint a0 = pack2(s[2 * kk][0], s[2 * kk][1]), a1 = pack2(s[2 * kk][2], s[2 * kk][3]);
      const uint a2 = pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), a3 = pack2(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      // ldmatrix.x4.trans: lane l addresses row l % 8 of matrix l / 8 = (keys +0 / +8, dims +0 / +8).
      const uint base =
          MMA_SMEM(Vs + (kk * 16 + (mat & 1) * 8 + lane % 8) * VSW + (mat >> 1) * 4);
#pragma unroll
      for (int np = 0; np < NTO / 2; ++np) {
        uint b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3)
                     : "r"(base + np * 32));  // 16 dims = 8 words = 32 bytes further
        mma_tile(o[2 * np], a0, a1, a2, a3, b0, b1);
        mma_tile(o[2 * np + 1], a0, a1, a2, a3, b2, b3);
      }
    }
    frag_tile_done();
  }

  // Rows past Lq are not stored.
  frag_store(o, l, O + o_off + b * so.s0 + h * so.s1 + (long)r.ra * so.s2,
             O + o_off + b * so.s0 + h * so.s1 + (long)r.rb * so.s2, so.s3, r.ra < Lq, r.rb < Lq, t);
}
