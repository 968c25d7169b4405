// SPDX-License-Identifier: Apache-2.0
// prism scaled-dot-product attention in f32 on NVIDIA tensor cores with f32-class accuracy: the
// flash-attention scheme of attention_mma.cl with m16n8k8 TF32 mma, each f32 operand x split
// into x = hi + lo (both TF32, rounded to nearest: hi keeps 11 significant bits, lo the next 11)
// and each product taken as hi*hi + hi*lo + lo*hi ("3xTF32"; the dropped lo*lo term is below
// f32's own rounding), accumulated in f32. Unlike plain TF32 (an opt-in elsewhere in prism) the
// result meets the f32 kernels' error bound; the op suite checks it against the same tolerance.
// A work-group of NW warps owns 16 * NW query rows of one (batch, head); warp w owns rows
// 16w .. 16w + 15, kept as f32 A fragments in registers. Per tile of BN keys: K and V staged in
// local memory as f32 rows padded by 4 words (cp.async where built, overlapped with the math as
// attention_frag.cl describes); S = Q K^T; online softmax on the accumulator fragments (quad shuffles, log2 units);
// O += P V. For P V the weights stay in the registers they were computed in: the k index of the
// TF32 A fragment (columns t and t + 4 of a lane) is mapped to keys 2t and 2t + 1, which are what
// an accumulator fragment holds (c0 c1 at columns 2t, 2t + 1), and V's B fragment is read with
// the same mapping (rows 2t and 2t + 1 of the V tile).
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32), g = lane / 4,
// t = lane % 4: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); b0 (k=t, n=g), b1 (k=t+4, n=g);
// c0 c1 (g, 2t, 2t+1), c2 c3 (g+8, 2t, 2t+1).
// Q [B,Hq,Lq,D], K [B,Hkv,Lk,D], V [B,Hkv,Lk,DV] f32: unit head-dim stride, K's and V's other
// strides and offsets multiples of 4 elements (16-byte rows); O any strides. CAUSAL, MASK_KIND,
// KEY_MASK as in attention.cl; a row that sees no key outputs zeros.
// Build defines: D, DV (multiples of 8), NW (warps), BN (8, 16, 32), STAGES (1, 2), CP_ASYNC,
// CAUSAL, MASK_KIND, KEY_MASK (with KM_T). PRISM_DTYPE is 0.
// Local memory: 4 * STAGES * BN * (D + 4 + DV + 4) bytes.

#include "gemm_common.cl"  // GT (float), PRISM_STORE

#include "attention_common.cl"  // mask_t, MASK_VALUE, KEY_OK

#include "mma_common.cl"  // mma_tile (TF32 for PRISM_DTYPE 0), MMA_SMEM

#define ATTN_EXP2 exp2
#include "attention_frag.cl"  // NT, KSW, VSW, NTS, quad_max / quad_sum, tile staging, frag_softmax, frag_store

#define NTO (DV / 8)  // output n-tiles

// x = hi + lo in TF32, each rounded to nearest (.x hi, .y lo).
inline uint2 split_tf32(float x) {
  uint hi, lo;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(x));
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(x - as_float(hi)));
  return (uint2)(hi, lo);
}

// c += a b as hi*hi + hi*lo + lo*hi (the small terms first).
inline void mma3(float* c, uint2 a0, uint2 a1, uint2 a2, uint2 a3, uint2 b0, uint2 b1) {
  mma_tile(c, a0.y, a1.y, a2.y, a3.y, b0.x, b1.x);
  mma_tile(c, a0.x, a1.x, a2.x, a3.x, b0.y, b1.y);
  mma_tile(c, a0.x, a1.x, a2.x, a3.x, b0.x, b1.x);
}

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attention_tf32x3(int Hq, int Hkv, int Lq, int Lk, float scale,
                      __global const float* restrict Q, long q_off, long4 sq, __global const float* restrict Kp,
                      long k_off, long4 sk, __global const float* restrict Vp, long v_off, long4 sv,
                      __global float* O, long o_off, long4 so, __global const mask_t* Mk, long m_off, long4 sm,
                      __global const km_t* Km, long km_off, long skb, long skt) {
  __local uint Kbuf[STAGES][BN * KSW] __attribute__((aligned(16)));  // f32 bit patterns
  __local uint Vbuf[STAGES][BN * VSW] __attribute__((aligned(16)));
  const int lid = get_local_id(0);
  const int lane = lid % 32, warp = lid / 32;
  const int g = lane / 4, t = lane % 4;
  const int h = get_global_id(1);
  const long b = get_global_id(2);
  const int hk = h / (Hq / Hkv);
  const float sl2 = scale * M_LOG2E_F;

  ATTN_SEEK(b, h, hk);

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

    // S = Q K^T (each q word split once per k-step, shared by the tile's n-tiles).
    float s[NTS][4];
#pragma unroll
    for (int n = 0; n < NTS; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < KQ; ++kk) {
      const uint2 a0 = split_tf32(as_float(qf[kk][0])), a1 = split_tf32(as_float(qf[kk][1])),
                  a2 = split_tf32(as_float(qf[kk][2])), a3 = split_tf32(as_float(qf[kk][3]));
#pragma unroll
      for (int n = 0; n < NTS; ++n) {
        const __local uint* kr = Ks + (n * 8 + g) * KSW + kk * 8 + t;
        mma3(s[n], a0, a1, a2, a3, split_tf32(as_float(kr[0])), split_tf32(as_float(kr[4])));
      }
    }

    // Online softmax (attention_frag.cl).
    frag_softmax(s, o, r, sl2, j0, t, Mk, sm, Km, skt, m, l);

    frag_v_ready(Kbuf, j0, r.loop_end, Kp, sk.s2, Lk, lid);
    // O += P V (frag_softmax rescaled O), k index t -> key 2t, t + 4 -> key 2t + 1 (see the header).
#pragma unroll
    for (int kk = 0; kk < NTS; ++kk) {
      const uint2 a0 = split_tf32(s[kk][0]), a1 = split_tf32(s[kk][2]), a2 = split_tf32(s[kk][1]),
                  a3 = split_tf32(s[kk][3]);
      const __local uint* v0 = Vs + (kk * 8 + 2 * t) * VSW + g;
#pragma unroll
      for (int n = 0; n < NTO; ++n)
        mma3(o[n], a0, a1, a2, a3, split_tf32(as_float(v0[n * 8])), split_tf32(as_float(v0[VSW + n * 8])));
    }
    frag_tile_done();
  }

  // Rows past Lq are not stored.
  frag_store(o, l, O + o_off + b * so.s0 + h * so.s1 + (long)r.ra * so.s2,
             O + o_off + b * so.s0 + h * so.s1 + (long)r.rb * so.s2, so.s3, r.ra < Lq, r.rb < Lq, t);
}
