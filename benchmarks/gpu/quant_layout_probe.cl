// SPDX-License-Identifier: Apache-2.0
// Kernels of quant_layout_probe.cpp: does the layout of q4_0 weights in device memory bound the
// GPU's M = 1 GEMV? y[n] = sum_k W[n, k] * x[k], W in q4_0 (32 weights a block, an f16 scale d,
// weights (nibble - 8) * d; byte j of a block's 16 holds k = j in its low nibble and k = j + 16 in
// its high one), stored one of two ways:
// - gguf: the file's blocks, 18 bytes each (d, then 16 nibble bytes), rows back to back, so a
//   block is only 2-byte aligned;
// - planar: all nibble bytes of a row first (qs [N, K/2], 16-byte aligned blocks), the scales in a
//   separate plane (d [N, K/32] halves): llama.cpp's SYCL backend reorders q4_0 this way.
// Each GEMV kernel is one warp-sized team of 32 lanes per NB weight rows, lane l taking blocks
// l, l + 32, ... and UNROLL of them per step (loads issued before the step's arithmetic), then a
// local-memory sum per row. Activations: f32 (weights dequantized to floats from bits, as prism's
// GPU kernels do) or int8 per 32-block (dp4a; xd = d_a, xs = d_a * sum(q_a), so q4_0's -8 is one
// multiply-add a block). bf16_rows reads bf16 weights [N, K] with the same team shape; read_sum
// streams a buffer in 16-byte loads: the read bandwidth the GEMVs are held against.
// q4_gguf_i8_chunk and q4_gguf_i8_stage read GGUF's blocks in 16-byte loads (a lane per 8-block
// chunk, or the team's rows staged through local memory in coalesced pieces): both lost to the
// 16-bit walk on the H200 (benchmarks/RESULTS.md, "Issue 17, session 41").
// Build defines: NB, UNROLL, WARPS, Q_DP4A (1: inline PTX dp4a), LPR (q4_gguf_i8_chunk).

#define LANES 32

inline int dp4a_us(uint a, uint b, int c) {  // unsigned bytes of a times signed bytes of b
#if Q_DP4A
  int r;
  asm volatile("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
#else
  const uchar4 x = as_uchar4(a);
  const char4 y = as_char4(b);
  return c + x.s0 * y.s0 + x.s1 * y.s1 + x.s2 * y.s2 + x.s3 * y.s3;
#endif
}

// 2^23 + n as a float, minus 2^23 + 8: nibble n - 8, exact, without an int-to-float conversion.
#define NIB(w, s) (as_float(0x4B000000u | (((w) >> (s)) & 0xFu)) - 8388616.0f)

inline float word_dot_lo(uint w, float4 a) {
  return NIB(w, 0) * a.s0 + NIB(w, 8) * a.s1 + NIB(w, 16) * a.s2 + NIB(w, 24) * a.s3;
}
inline float word_dot_hi(uint w, float4 a) {
  return NIB(w, 4) * a.s0 + NIB(w, 12) * a.s1 + NIB(w, 20) * a.s2 + NIB(w, 28) * a.s3;
}

// One block's float dot product: nibble words q (k 0..15 low, 16..31 high) against x[32].
inline float block_dot_f(uint4 q, const __global float4* x) {
  float s = word_dot_lo(q.s0, x[0]) + word_dot_lo(q.s1, x[1]) + word_dot_lo(q.s2, x[2]) + word_dot_lo(q.s3, x[3]);
  return s + word_dot_hi(q.s0, x[4]) + word_dot_hi(q.s1, x[5]) + word_dot_hi(q.s2, x[6]) + word_dot_hi(q.s3, x[7]);
}

inline int block_dot_i8(uint4 q, uint4 a0, uint4 a1) {
  const uint m = 0x0F0F0F0Fu;
  int s = dp4a_us(q.s0 & m, a0.s0, 0);
  s = dp4a_us(q.s1 & m, a0.s1, s);
  s = dp4a_us(q.s2 & m, a0.s2, s);
  s = dp4a_us(q.s3 & m, a0.s3, s);
  s = dp4a_us((q.s0 >> 4) & m, a1.s0, s);
  s = dp4a_us((q.s1 >> 4) & m, a1.s1, s);
  s = dp4a_us((q.s2 >> 4) & m, a1.s2, s);
  return dp4a_us((q.s3 >> 4) & m, a1.s3, s);
}

// A gguf block's nibble words from 2-byte-aligned storage: eight 16-bit loads.
inline uint4 gguf_words(const __global uchar* blk) {
  const __global ushort* h = (const __global ushort*)(blk + 2);
  return (uint4)(h[0] | ((uint)h[1] << 16), h[2] | ((uint)h[3] << 16), h[4] | ((uint)h[5] << 16),
                 h[6] | ((uint)h[7] << 16));
}

inline void finish_rows(__local float* red, float acc[NB], int lane, int team, int n0, int N,
                        __global float* y) {
  for (int j = 0; j < NB; ++j) {
    red[team * LANES + lane] = acc[j];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0 && n0 + j < N) {
      float s = 0.0f;
      for (int l = 0; l < LANES; ++l) s += red[team * LANES + l];
      y[n0 + j] = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

#define TEAM_SETUP                                                  \
  __local float red[LANES * WARPS];                                 \
  const int lane = get_local_id(0) % LANES, team = get_local_id(0) / LANES; \
  const int n0 = (get_group_id(0) * WARPS + team) * NB;             \
  const int blocks = K / 32;                                        \
  float acc[NB];                                                    \
  for (int j = 0; j < NB; ++j) acc[j] = 0.0f;

#define ROW(j) ((long)min(n0 + (j), N - 1))

// The q4 GEMV walk, one body for the four kernels: LOAD(j, b) sets q[u][j] (nibble words) and
// s[u][j] (the scale) for row j's block b; DOT(u, j, b) is the block's contribution to acc[j].
#define Q4_WALK_BODY(LOAD, DOT)                                       \
  TEAM_SETUP                                                          \
  for (int b0 = lane; b0 < blocks; b0 += LANES * UNROLL) {            \
    uint4 q[UNROLL][NB];                                              \
    float s[UNROLL][NB];                                              \
    _Pragma("unroll") for (int u = 0; u < UNROLL; ++u)                \
        _Pragma("unroll") for (int j = 0; j < NB; ++j) {              \
      const int b = min(b0 + u * LANES, blocks - 1);                  \
      LOAD(j, b);                                                     \
      if (b0 + u * LANES >= blocks) s[u][j] = 0.0f;                   \
    }                                                                 \
    _Pragma("unroll") for (int u = 0; u < UNROLL; ++u) {              \
      const int b = min(b0 + u * LANES, blocks - 1);                  \
      DOT_PREP(b);                                                    \
      _Pragma("unroll") for (int j = 0; j < NB; ++j) acc[j] = DOT(u, j, b); \
    }                                                                 \
  }
#define Q4_WALK(LOAD, DOT)                                            \
  Q4_WALK_BODY(LOAD, DOT)                                             \
  finish_rows(red, acc, lane, team, n0, N, y);
#define Q4_WALK_SCALED(LOAD, DOT, RS)          \
  Q4_WALK_BODY(LOAD, DOT)                      \
  for (int j = 0; j < NB; ++j) acc[j] *= (RS); \
  finish_rows(red, acc, lane, team, n0, N, y);

#define LOAD_PLANAR(j, b)                 \
  q[u][j] = qs[ROW(j) * blocks + (b)];    \
  s[u][j] = vload_half(ROW(j) * blocks + (b), d)
#define LOAD_GGUF(j, b)                                                     \
  const __global uchar* blk = W + (ROW(j) * blocks + (b)) * 18;             \
  q[u][j] = gguf_words(blk);                                                \
  s[u][j] = vload_half(0, (const __global half*)blk)
#define DOT_F(u, j, b) fma(s[u][j], block_dot_f(q[u][j], x + 8 * (b)), acc[j])
#define DOT_I8(u, j, b) fma(s[u][j], fma(da, (float)block_dot_i8(q[u][j], a0, a1), -8.0f * sa), acc[j])

#define DOT_PREP(b)
__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void q4_planar_f(
    int N, int K, __global const uint4* qs, __global const half* d, __global const float4* x, __global float* y) {
  Q4_WALK(LOAD_PLANAR, DOT_F)
}

__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void q4_gguf_f(
    int N, int K, __global const uchar* W, __global const float4* x, __global float* y) {
  Q4_WALK(LOAD_GGUF, DOT_F)
}
#undef DOT_PREP

// The int8 forms take the activation block (two uint4), its d_a and s_a once per block.
#define DOT_PREP(b)                                         \
  const uint4 a0 = xq[2 * (b)], a1 = xq[2 * (b) + 1];       \
  const float da = xd[b], sa = xs[b]
__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void q4_planar_i8(
    int N, int K, __global const uint4* qs, __global const half* d, __global const uint4* xq,
    __global const float* xd, __global const float* xs, __global float* y) {
  Q4_WALK(LOAD_PLANAR, DOT_I8)
}

__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void q4_gguf_i8(
    int N, int K, __global const uchar* W, __global const uint4* xq, __global const float* xd,
    __global const float* xs, __global float* y) {
  Q4_WALK(LOAD_GGUF, DOT_I8)
}
#undef DOT_PREP

// GGUF's own blocks in 16-byte loads: a row of K / 32 blocks is K / 256 chunks of 8 blocks, 144
// bytes each, and a row's bytes (K / 32 * 18) are a multiple of 16, so every chunk is 16-byte
// aligned (the buffer is). Lane l of a team reads chunk c of its row in 9 uint4 loads: pair p's
// 36 bytes are words 9p .. 9p + 8, the even block's scale the low half of word 9p and its
// nibbles 2 bytes into the pair (each nibble word from two neighbours), the odd block's scale the
// high half of word 9p + 4 and its nibbles words 9p + 5 .. 9p + 8. LPR lanes share a row (their
// chunks c = lane % LPR, + LPR, ...), so a team holds 32 / LPR rows at once and NB rows in all
// (NB * LPR / 32 a lane, loaded before the chunk's arithmetic); the 8 blocks' activations are
// loaded once for them.
#ifndef LPR
#define LPR 32
#endif
#define CHUNK_ROWS (NB * LPR / LANES)
inline float half_bits(uint h) {
  const ushort b = (ushort)h;
  return vload_half(0, (const __private half*)&b);
}
__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void q4_gguf_i8_chunk(
    int N, int K, __global const uint4* W, __global const uint4* xq, __global const float* xd,
    __global const float* xs, __global float* y) {
  __local float red[LANES * WARPS];
  const int lane = get_local_id(0) % LANES, team = get_local_id(0) / LANES;
  const int n0 = (get_group_id(0) * WARPS + team) * NB;
  const int sub = lane / LPR, cl0 = lane % LPR;
  const int cpr = K / 256, row16 = K / 32 * 18 / 16;
  float acc[CHUNK_ROWS];
  for (int t = 0; t < CHUNK_ROWS; ++t) acc[t] = 0.0f;
  for (int c = cl0; c < cpr; c += LPR) {
    uint4 w[CHUNK_ROWS][9];
#pragma unroll
    for (int t = 0; t < CHUNK_ROWS; ++t)
#pragma unroll
      for (int i = 0; i < 9; ++i) w[t][i] = W[ROW(sub + t * (LANES / LPR)) * row16 + c * 9 + i];
    const float8 da = vload8(c, xd), sa = vload8(c, xs);
#pragma unroll
    for (int h = 0; h < 8; ++h) {
      const uint4 a0 = xq[16 * c + 2 * h], a1 = xq[16 * c + 2 * h + 1];
      const float dah = ((const float*)&da)[h], sah = ((const float*)&sa)[h];
#pragma unroll
      for (int t = 0; t < CHUNK_ROWS; ++t) {
        const uint* v = (const uint*)w[t];
        const int p = 9 * (h / 2);
        uint4 q;
        float dw;
        if (h % 2 == 0) {
          q = (uint4)((v[p] >> 16) | (v[p + 1] << 16), (v[p + 1] >> 16) | (v[p + 2] << 16),
                      (v[p + 2] >> 16) | (v[p + 3] << 16), (v[p + 3] >> 16) | (v[p + 4] << 16));
          dw = half_bits(v[p] & 0xFFFFu);
        } else {
          q = (uint4)(v[p + 5], v[p + 6], v[p + 7], v[p + 8]);
          dw = half_bits(v[p + 4] >> 16);
        }
        acc[t] = fma(dw, fma(dah, (float)block_dot_i8(q, a0, a1), -8.0f * sah), acc[t]);
      }
    }
  }
  for (int t = 0; t < CHUNK_ROWS; ++t) {
    red[team * LANES + lane] = acc[t];
    barrier(CLK_LOCAL_MEM_FENCE);
    const int r = n0 + sub + t * (LANES / LPR);
    if (cl0 == 0 && r < N) {
      float s = 0.0f;
      for (int l = 0; l < LPR; ++l) s += red[team * LANES + sub * LPR + l];
      y[r] = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// The same 16-byte loads, coalesced: a team's NB rows (NB * K / 32 * 18 bytes, whole uint4s) are
// read lane by lane in consecutive 16-byte pieces (lane l the pieces l, l + 32, ...), all of them
// before any arithmetic, into the group's local memory `st` (the host sizes it: WARPS * NB rows);
// after a barrier lane l walks block pairs p = l, l + 32, ... of each row from there (pair p's
// 9 words at 9p: lanes 9 words apart fall in distinct banks), the pairs split as in
// q4_gguf_i8_chunk.
__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void q4_gguf_i8_stage(
    int N, int K, __global const uint4* W, __global const uint4* xq, __global const float* xd,
    __global const float* xs, __global float* y, __local uint4* st) {
  __local float red[LANES * WARPS];
  const int lane = get_local_id(0) % LANES, team = get_local_id(0) / LANES;
  const int n0 = (get_group_id(0) * WARPS + team) * NB;
  const int row16 = K / 32 * 18 / 16, pairs = K / 64;
  __local uint4* mine = st + team * NB * row16;
  // Rows n0 .. n0 + NB - 1 are consecutive in memory (clamped at N - 1 row by row).
  for (int j = 0; j < NB; ++j) {
    const __global uint4* src = W + ROW(j) * row16;
    for (int i = lane; i < row16; i += LANES) mine[j * row16 + i] = src[i];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const __local uint* w = (const __local uint*)mine;
  float acc[NB];
  for (int j = 0; j < NB; ++j) acc[j] = 0.0f;
  for (int p = lane; p < pairs; p += LANES) {
    const uint4 a0 = xq[4 * p], a1 = xq[4 * p + 1], b0 = xq[4 * p + 2], b1 = xq[4 * p + 3];
    const float2 da = vload2(p, xd), sa = vload2(p, xs);
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const __local uint* v = w + j * row16 * 4 + 9 * p;
      uint u[9];
#pragma unroll
      for (int i = 0; i < 9; ++i) u[i] = v[i];
      const uint4 qe = (uint4)((u[0] >> 16) | (u[1] << 16), (u[1] >> 16) | (u[2] << 16),
                               (u[2] >> 16) | (u[3] << 16), (u[3] >> 16) | (u[4] << 16));
      const uint4 qo = (uint4)(u[5], u[6], u[7], u[8]);
      acc[j] = fma(half_bits(u[0] & 0xFFFFu), fma(da.x, (float)block_dot_i8(qe, a0, a1), -8.0f * sa.x), acc[j]);
      acc[j] = fma(half_bits(u[4] >> 16), fma(da.y, (float)block_dot_i8(qo, b0, b1), -8.0f * sa.y), acc[j]);
    }
  }
  finish_rows(red, acc, lane, team, n0, N, y);
}

// Does a quantize launch before the int8 GEMV cost more than quantizing inside it? The decode
// block's int8 GEMVs each follow a launch that takes the row x to int8 blocks (prism's Q1, Q2 and
// quantize_rows_q8); quantize_x is that launch (an item a block, 64-item groups, xq/xd/xs to global
// memory), and q4_gguf_i8_local the GEMV that quantizes x itself: every group takes the whole row
// into local memory (an item a block, as quantize_x), sums its squares, waits, walks the blocks as
// q4_gguf_i8 does from the local copy, and scales each output by rsqrt(mean(x^2) + eps), the RMS
// norm's scalar that a norm-fused GEMV applies after the dot (prism's stage 2 and qkv). Both take
// K <= QL_K. The host times the pair (quantize_x, q4_gguf_i8) against q4_gguf_i8_local back to back.
#ifndef QL_K
#define QL_K 11008
#endif
inline float quantize_block(const __global float4* x, int b, uint4* q0, uint4* q1, float* dq, float* sq) {
  float4 v[8];
  float amax = 0.0f, ss = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    v[j] = x[8 * b + j];
    ss += dot(v[j], v[j]);
    const float4 a = fabs(v[j]);
    amax = fmax(amax, fmax(fmax(a.x, a.y), fmax(a.z, a.w)));
  }
  const float dd = amax * (1.0f / 127.0f), id = dd > 0.0f ? 1.0f / dd : 0.0f;
  uint w[8];
  int4 sum = (int4)(0);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const char4 c = convert_char4_sat_rte(v[j] * id);
    w[j] = as_uint(c);
    sum += convert_int4(c);
  }
  *q0 = (uint4)(w[0], w[1], w[2], w[3]);
  *q1 = (uint4)(w[4], w[5], w[6], w[7]);
  *dq = dd;
  *sq = dd * (float)(sum.x + sum.y + sum.z + sum.w);
  return ss;
}

// The group's sum of v (every item gets it; a tree in local memory t, LANES * WARPS floats).
inline float group_sum(__local float* t, float v) {
  const int i = get_local_id(0);
  t[i] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = LANES * WARPS / 2; h > 0; h >>= 1) {
    if (i < h) t[i] += t[i + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = t[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void quantize_x(
    int K, __global const float4* x, __global uint4* xq, __global float* xd, __global float* xs,
    __global float* xss) {
  const int b = get_global_id(0);
  if (b >= K / 32) return;
  uint4 q0, q1;
  float dq, sq;
  xss[b] = quantize_block(x, b, &q0, &q1, &dq, &sq);
  xq[2 * b] = q0;
  xq[2 * b + 1] = q1;
  xd[b] = dq;
  xs[b] = sq;
}

// q4_gguf_i8 after quantize_x, with the norm's scalar from quantize_x's block sums of squares
// (summed by every team, as prism's stage 2 does).
__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void q4_gguf_i8_norm(
    int N, int K, __global const uchar* W, __global const uint4* xq, __global const float* xd,
    __global const float* xs, __global const float* xss, __global float* y) {
#define DOT_PREP(b)                                   \
  const uint4 a0 = xq[2 * (b)], a1 = xq[2 * (b) + 1]; \
  const float da = xd[b], sa = xs[b]
  __local float lss[LANES * WARPS];
  float ss = 0.0f;
  for (int b = get_local_id(0); b < K / 32; b += LANES * WARPS) ss += xss[b];
  const float rs = rsqrt(group_sum(lss, ss) / (float)K + 1e-5f);
  Q4_WALK_SCALED(LOAD_GGUF, DOT_I8, rs)
#undef DOT_PREP
}

__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void q4_gguf_i8_local(
    int N, int K, __global const uchar* W, __global const float4* x, __global float* y) {
  __local uint4 lq[QL_K / 16];
  __local float ld[QL_K / 32], ls[QL_K / 32], lss[LANES * WARPS];
  float ss = 0.0f;
  for (int b = get_local_id(0); b < K / 32; b += LANES * WARPS) {
    uint4 q0, q1;
    float dq, sq;
    ss += quantize_block(x, b, &q0, &q1, &dq, &sq);
    lq[2 * b] = q0;
    lq[2 * b + 1] = q1;
    ld[b] = dq;
    ls[b] = sq;
  }
  const float rs = rsqrt(group_sum(lss, ss) / (float)K + 1e-5f);  // its barrier orders lq too
#define DOT_PREP(b)                                   \
  const uint4 a0 = lq[2 * (b)], a1 = lq[2 * (b) + 1]; \
  const float da = ld[b], sa = ls[b]
  Q4_WALK_SCALED(LOAD_GGUF, DOT_I8, rs)
#undef DOT_PREP
}

// bf16 weights [N, K] (K % 256 == 0): lane l takes the 8 weights at k = 8 * (l + 32 i).
__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void bf16_rows(
    int N, int K, __global const uint4* W, __global const float4* x, __global float* y) {
  TEAM_SETUP
  const int chunks = K / 8;
  for (int c0 = lane; c0 < chunks; c0 += LANES * UNROLL) {
    uint4 w[UNROLL][NB];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int j = 0; j < NB; ++j) w[u][j] = W[ROW(j) * chunks + min(c0 + u * LANES, chunks - 1)];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (c0 + u * LANES >= chunks) break;
      const float4 a0 = x[2 * (c0 + u * LANES)], a1 = x[2 * (c0 + u * LANES) + 1];
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        const uint4 v = w[u][j];
        const float4 lo = (float4)(as_float(v.s0 << 16), as_float(v.s0 & 0xFFFF0000u), as_float(v.s1 << 16),
                                   as_float(v.s1 & 0xFFFF0000u));
        const float4 hi = (float4)(as_float(v.s2 << 16), as_float(v.s2 & 0xFFFF0000u), as_float(v.s3 << 16),
                                   as_float(v.s3 & 0xFFFF0000u));
        acc[j] += dot(lo, a0) + dot(hi, a1);
      }
    }
  }
  (void)blocks;
  finish_rows(red, acc, lane, team, n0, N, y);
}

__kernel void read_sum(__global const uint4* p, long n16, __global uint* out) {
  uint a = 0;
  for (long i = get_global_id(0); i < n16; i += get_global_size(0)) {
    const uint4 v = p[i];
    a += v.s0 ^ v.s1 ^ v.s2 ^ v.s3;
  }
  out[get_global_id(0)] = a;
}
