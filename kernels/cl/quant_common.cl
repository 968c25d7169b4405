// SPDX-License-Identifier: Apache-2.0
// GGUF's block-quantized weights as the kernels read them (gemm_quant.cl, gemv_chain.cl): QTYPE 0
// q8_0 (34 B: f16 d, i8 q[32]; w = d q), 1 q4_0 (18 B: f16 d, u8 q[16], low nibbles k 0..15 and
// high nibbles 16..31; w = d (q - 8)), 2 q4_1 (20 B: f16 d, f16 m, u8 q[16]; w = d q + m).
// Q4_OFFSET (default 8) is what q_values subtracts from q4_0's nibbles: a kernel that carries the
// 8 in a per-block sum instead defines it 0 before including this file.

#if QTYPE == 0
#define QBYTES 34
#elif QTYPE == 1
#define QBYTES 18
#elif QTYPE == 2
#define QBYTES 20
#else
#error "QTYPE must be 0 (q8_0), 1 (q4_0) or 2 (q4_1)"
#endif

#ifndef Q4_OFFSET
#define Q4_OFFSET 8.0f
#endif

// The 32 quantized values of the block at p, unscaled: lo holds k 0..15, hi k 16..31.
inline void q_values(const __global uchar* p, float16* lo, float16* hi) {
#if QTYPE == 0
  *lo = convert_float16(as_char16(vload16(0, p + 2)));
  *hi = convert_float16(as_char16(vload16(0, p + 18)));
#elif QTYPE == 1
  const uchar16 q = vload16(0, p + 2);
  *lo = convert_float16(q & (uchar16)0xF) - Q4_OFFSET;
  *hi = convert_float16(q >> (uchar16)4) - Q4_OFFSET;
#else
  const uchar16 q = vload16(0, p + 4);
  *lo = convert_float16(q & (uchar16)0xF);
  *hi = convert_float16(q >> (uchar16)4);
#endif
}

// A block's f16 scale (at p) or min (at p + 2) as f32. On x86 with F16C one vcvtph2ps: PoCL's
// vload_half converts in software there (objdump, 2026-11-23), which cost as many instructions
// per block as the block's int8 dot product (the i8 kernel's loop: 32 -> 16 instructions).
inline float q_half_at(const __global uchar* p) {
#if defined(__F16C__) && defined(__clang__)
  typedef short q_v8hi __attribute__((vector_size(16)));
  const q_v8hi v = {(short)((ushort)p[0] | ((ushort)p[1] << 8)), 0, 0, 0, 0, 0, 0, 0};
  return __builtin_ia32_vcvtph2ps(v)[0];
#else
  return vload_half(0, (const __global half*)p);
#endif
}

inline float q_scale(const __global uchar* p) { return q_half_at(p); }

inline float q_min(const __global uchar* p) { return q_half_at(p + 2); }


// The slot walk (gemm_quant.cl's gemm_q_rows, gemv_chain.cl's quantized tasks): a block's
// quantized bytes as SPB 4-byte slots. Slot q of q8_0 holds k 4q .. 4q + 3; of q4_0 / q4_1 the
// low nibbles k 4q .. 4q + 3 and the high ones k 16 + 4q .. 16 + 4q + 3.
#if QTYPE == 0
#define SPB 8     // 4-byte slots per block: 4 weights each
#define QOFF 2    // quantized bytes start after the f16 scale
#elif QTYPE == 1
#define SPB 4     // 4 bytes = 4 low nibbles (k 4q..4q+3) and 4 high ones (k 16+4q..)
#define QOFF 2
#else
#define SPB 4
#define QOFF 4    // after the f16 scale and the f16 min
#endif

// Four activations from k as f32: one 16-byte (f32) or 8-byte load when A_VEC4.
inline float4 q_act4(const __global GT* a, int k) {
#if PRISM_DTYPE == 0
#if A_VEC4
  return *(const __global float4*)(a + k);
#else
  return vload4(0, a + k);
#endif
#elif PRISM_DTYPE == 1
  return vload_half4(0, a + k);
#else
#if A_VEC4
  const uint2 u = *(const __global uint2*)(a + k);
#else
  const uint2 u = as_uint2(vload4(0, a + k));
#endif
  return (float4)(as_float(u.s0 << 16), as_float(u.s0 & 0xffff0000u), as_float(u.s1 << 16),
                  as_float(u.s1 & 0xffff0000u));
#endif
}

// The 4 quantized bytes of slot q of the block at byte offset `o` (o + QOFF is 2-byte aligned
// for q8_0/q4_0, 4-byte aligned for q4_1): two 16-bit loads or one 32-bit load.
inline uint q_slot(const __global uchar* W, long o, int q) {
  const long b = o + QOFF + 4 * q;
#if QTYPE == 2
  return *(const __global uint*)(W + b);
#else
  const __global ushort* h = (const __global ushort*)(W + b);
  return (uint)h[0] | ((uint)h[1] << 16);
#endif
}

// Q_MAGIC 1: nibbles become floats without a conversion instruction: the bits 0x4B000000 | n are
// the float 2^23 + n, and subtracting 2^23 (and q4_0's 8) is exact. One or and one add per weight
// where an int-to-float conversion (quarter rate on NVIDIA GPUs) and an add were. On the H200
// (2026-11-27) it took the q4_0 rows GEMV [16384, 4096] from 1103 to 1292 GB/s and [32768, 8192]
// from 1512 to 1584, and q4_0 decode up 1.7-1.9% (benchmarks/RESULTS.md, "Issue 17, session 23").
// GPUs use it (q4_0 and q4_1; q8_0's signed bytes keep their conversion); CPUs convert a vector in
// one instruction and keep the conversion too. -DQ_MAGIC=0/1 (PRISM_CL_OPTIONS) picks either.
#ifndef Q_MAGIC
#define Q_MAGIC (!PRISM_CPU)
#endif
inline float4 q_magic4(uint4 b, float off) { return as_float4(b | (uint4)0x4B000000u) - (8388608.0f + off); }

// A slot's weights as f32, unscaled (q4_0's offset of 8 taken off): lo k 4q .. 4q + 3, hi (q4_0,
// q4_1) k 16 + 4q .. 16 + 4q + 3.
inline void q_slot_floats(uint v, float4* lo, float4* hi) {
#if QTYPE == 0
  *lo = convert_float4(as_char4(v));
  *hi = (float4)(0.0f);
#elif Q_MAGIC
  const uint4 b = (uint4)(v, v >> 8, v >> 16, v >> 24);
  *lo = q_magic4(b & (uint4)0xFu, QTYPE == 1 ? 8.0f : 0.0f);
  *hi = q_magic4((b >> (uint4)4) & (uint4)0xFu, QTYPE == 1 ? 8.0f : 0.0f);
#else
  const uchar4 u = as_uchar4(v);
  *lo = convert_float4(u & (uchar4)0xF) - (QTYPE == 1 ? 8.0f : 0.0f);
  *hi = convert_float4(u >> (uchar4)4) - (QTYPE == 1 ? 8.0f : 0.0f);
#endif
}

#ifdef QA8
// a . b of 4 packed signed bytes, plus c: dp4a through inline PTX where the host found the
// driver accepts it (Q_DP4A=1: NVIDIA), four multiplies elsewhere. The int8-activation walks
// (QA8: gemm_quant.cl's rows kernel, gemv_chain.cl's stages 2 and 3) use it.
inline int q_dp4a(uint a, uint b, int c) {
#if Q_DP4A
  int r;
  asm volatile("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
#else
  const char4 x = as_char4(a), y = as_char4(b);
  return c + x.s0 * y.s0 + x.s1 * y.s1 + x.s2 * y.s2 + x.s3 * y.s3;
#endif
}

// Block b of x (one row) to int8, its 32 bytes as 8 words in qw, its scale in *dq and d * sum(q)
// in *sq, x scaled by g where given (n before its norm's scalar: gemv_chain.cl's Q1, gemm_quant.cl's
// gemm_q_blocks_i8_local). The scale is absmax / 127 and values round to nearest, as gemm_quant.cl's
// quantize_rows_q8. Returns the block's sum of x^2 (before g) with g, 0 without.
inline float q8_quantize_block(int b, __global const GT* x, __global const GT* g, uint* qw, float* dq, float* sq) {
  float4 v[8];
  float amax = 0.0f, ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    v[j] = q_act4(x, b * 32 + 4 * j);
    if (g) {
      ss += dot(v[j], v[j]);
      v[j] *= q_act4(g, b * 32 + 4 * j);
    }
    const float4 a = fabs(v[j]);
    amax = fmax(amax, fmax(fmax(a.x, a.y), fmax(a.z, a.w)));
  }
  const float dd = amax * (1.0f / 127.0f), id = dd > 0.0f ? 1.0f / dd : 0.0f;
  int4 sum = (int4)(0);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const char4 c = convert_char4_sat_rte(v[j] * id);
    qw[j] = as_uint(c);
    sum += convert_int4(c);
  }
  *dq = dd;
  *sq = dd * (float)(sum.x + sum.y + sum.z + sum.w);
  return ss;
}

// Block pairs in 32-bit loads (gemm_quant.cl's gemm_q_pairs_i8, gemv_chain.cl's Q_PAIRS): a pair
// of q8_0 / q4_0 / q4_1 blocks (68 / 36 / 40 bytes) starts 4-byte aligned where a single block
// does not, so a walk reads it as PW words and takes each block's fields from them.
#define PW (2 * QBYTES / 4)
inline float q_half_bits(uint bits) {
  const ushort h = (ushort)bits;
  return vload_half(0, (const __private half*)&h);
}
// The 16 quant bytes at byte offset o (2-byte aligned) of the pair's words, as 4 words.
inline uint4 q_words_at(const uint* w, int o) {
  const int i = o / 4;
  if (o % 4 == 0) return (uint4)(w[i], w[i + 1], w[i + 2], w[i + 3]);
  return (uint4)((w[i] >> 16) | (w[i + 1] << 16), (w[i + 1] >> 16) | (w[i + 2] << 16),
                 (w[i + 2] >> 16) | (w[i + 3] << 16), (w[i + 3] >> 16) | (w[i + 4] << 16));
}
// 16 int8 products: w . a over four words, plus c.
inline int q_dot16(uint4 w, uint4 a, int c) {
  return q_dp4a(w.s3, a.s3, q_dp4a(w.s2, a.s2, q_dp4a(w.s1, a.s1, q_dp4a(w.s0, a.s0, c))));
}
// The integer dot product of one weight block (quant bytes qb0 (q8_0: and qb1), in words) with
// the activation block (a0: k 0..15, a1: k 16..31 as words).
inline int q_block_dot(uint4 qb0, uint4 qb1, uint4 a0, uint4 a1) {
#if QTYPE == 0
  return q_dot16(qb1, a1, q_dot16(qb0, a0, 0));
#else
  return q_dot16((qb0 >> (uint4)4) & (uint4)0x0F0F0F0Fu, a1, q_dot16(qb0 & (uint4)0x0F0F0F0Fu, a0, 0));
#endif
}
// acc plus one weight block (scale dw, q4_1's min mw, quant words qb0 and for q8_0 qb1) against
// its activation block (a0, a1) with scale da and scaled sum sa = da * sum(q_a): q4_0's -8 is one
// multiply-add a block, d_w (d_a dot - 8 s_a), and q4_1's min d_w d_a dot + m s_a.
inline float q_block_i8(float dw, float mw, uint4 qb0, uint4 qb1, uint4 a0, uint4 a1, float da, float sa,
                        float acc) {
#if QTYPE == 0
  return fma(dw * da, (float)q_block_dot(qb0, qb1, a0, a1), acc);
#elif QTYPE == 1
  return fma(dw, fma(da, (float)q_block_dot(qb0, qb0, a0, a1), -8.0f * sa), acc);
#else
  return fma(dw * da, (float)q_block_dot(qb0, qb0, a0, a1), fma(mw, sa, acc));
#endif
}
// q_block_i8 for block `hb` (0 or 1) of the pair in words w.
inline float q_pair_block(const uint* w, int hb, uint4 a0, uint4 a1, float da, float sa, float acc) {
  const int o = hb * QBYTES;
  const float dw = q_half_bits(o % 4 == 0 ? w[o / 4] : w[o / 4] >> 16);
  const float mw = QTYPE == 2 ? q_half_bits(w[o / 4] >> 16) : 0.0f;
  const uint4 qb0 = q_words_at(w, o + QOFF);
  const uint4 qb1 = QTYPE == 0 ? q_words_at(w, o + 18) : qb0;
  return q_block_i8(dw, mw, qb0, qb1, a0, a1, da, sa, acc);
}
#endif
