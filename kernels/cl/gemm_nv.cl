// SPDX-License-Identifier: Apache-2.0
// prism GEMM, FP32 family for NVIDIA-class GPUs: C = alpha * A@B + beta * bias, f32 storage.
//
// gemm_nv (tiled): a work-group of (BN/TN) x (BM/TM) work-items (1-D, tx fastest) computes a
// BM x BN tile of C. Per BK-step every work-item fetches its share of the A and B slices with
// float4 global loads (along each operand's contiguous dim), and stores them k-major into one of
// two local buffers: As[buf][k][m], Bs[buf][k][n]. The next slice is fetched into registers while
// the current one is multiplied, so there is one barrier per step. A work-item's TM x TN register
// block is split into float4 groups spread over the tile (row = g*(BM/(TM/4)) + ty*4 + r), so a
// warp's local reads are consecutive float4s: conflict-free.
// gemm_nv_skinny (small M, B k-contiguous, e.g. linear weights [N, K]; f32, f16 or bf16 storage
// by PRISM_DTYPE): each warp owns NB output columns of MB rows; lane l sums its 16-byte pieces
// of k (4 f32 or 8 16-bit elements: k = 4l, 4l + 128, ... for f32), then the 32 partial sums
// meet in local memory.
// Build defines: TM, TN multiples of 4; BM, BN, BK; A_KCONTIG, B_NCONTIG (0/1); HAS_BIAS; SPLITK
// (default 1; > 1: partial sums to a workspace, then gemm_nv_reduce, built with -DREDUCE);
// LSWZ (0/1: unpadded local slices with swizzled columns, see below); STREAMK (0/1: the grid's
// last waves share their tiles' k-iterations, see gemm_nv's stream-K part); skinny: MB, NB,
// WARPS. Operand alignment: contiguous dims' partner strides and offsets are multiples of 4
// floats (the implementation's supports() checks this).

#ifndef PRISM_DTYPE
#define PRISM_DTYPE 0
#endif
#include "gemm_common.cl"  // epilogue (resolved by build_kernel)

#ifndef SPLITK
#define SPLITK 1
#endif

#ifdef BM
#define LX (BN / TN)
#define LY (BM / TM)
#define NT (LX * LY)
#define A_VECS (BM * BK / 4)
#define B_VECS (BN * BK / 4)
#define A_PER ((A_VECS + NT - 1) / NT)
#define B_PER ((B_VECS + NT - 1) / NT)
#ifndef LSWZ
#define LSWZ 0
#endif
#ifndef STREAMK
#define STREAMK 0
#endif
#if LSWZ
// Unpadded slices (a 256x128 tile's 16-deep double-buffered slices fill 48 KB exactly, NVIDIA
// OpenCL's local limit, where 4 floats of padding a row need 50 KB). Column x of k-row k is
// stored at x ^ SWZ_X(k): the XOR moves whole float4s (it is a multiple of 4) within an aligned
// run of 32 columns, one offset per 4 k-rows. The transposing scalar stores (a warp: 128 / BK
// consecutive columns of BK / 4 k-rows 4 apart) then land in 32 distinct banks, and the reads'
// float4s of one k-row stay distinct 16-byte chunks of each 8-lane phase.
#if BK != 4 && BK != 8 && BK != 16 && BK != 32
#error "LSWZ needs BK of 4, 8, 16 or 32"
#endif
#if BM % 32 || BN % 32
#error "LSWZ needs BM and BN multiples of 32"
#endif
#define PADA 0
#define PADB 0
#define SWZ(k, x) ((x) ^ ((128 / BK) * (((k) >> 2) & (BK / 4 - 1))))
#else
#define PADA 4
#define PADB 4
#define SWZ(k, x) (x)
#endif

// One float4 of a row-contiguous operand; elements past `lim` (the row's length) read as 0.
inline float4 nv_load4(__global const float* p, int pos, int lim) {
  if (pos + 3 < lim) return *(__global const float4*)p;  // 16-byte aligned (supports())
  float4 v = (float4)(0.0f);
  if (pos < lim) v.s0 = p[0];
  if (pos + 1 < lim) v.s1 = p[1];
  if (pos + 2 < lim) v.s2 = p[2];
  return v;
}

// Fetch the slice at k0 into registers.
#define NV_FETCH(k0)                                                                        \
_Pragma("unroll") for (int r = 0; r < A_PER; ++r) {                                    \
  const int v = tid + r * NT;                                                          \
  ra[r] = (float4)(0.0f);                                                              \
  if (A_VECS % NT == 0 || v < A_VECS) {                                                \
    if (A_KCONTIG) {                                                                   \
      const int mm = v / (BK / 4), kk = (v % (BK / 4)) * 4;                            \
      const int m = m0 + mm, k = (k0) + kk;                                            \
      if (m < M) ra[r] = nv_load4(A + (long)m * sam + k, k, kend);                        \
    } else {                                                                           \
      const int kk = v / (BM / 4), mm = (v % (BM / 4)) * 4;                            \
      const int m = m0 + mm, k = (k0) + kk;                                            \
      if (k < kend) ra[r] = nv_load4(A + (long)k * sak + m, m, M);                        \
    }                                                                                  \
  }                                                                                    \
}                                                                                      \
_Pragma("unroll") for (int r = 0; r < B_PER; ++r) {                                    \
  const int v = tid + r * NT;                                                          \
  rb[r] = (float4)(0.0f);                                                              \
  if (B_VECS % NT == 0 || v < B_VECS) {                                                \
    if (B_NCONTIG) {                                                                   \
      const int kk = v / (BN / 4), nn = (v % (BN / 4)) * 4;                            \
      const int n = n0 + nn, k = (k0) + kk;                                            \
      if (k < kend) rb[r] = nv_load4(B + (long)k * sbk + n, n, N);                        \
    } else {                                                                           \
      const int nn = v / (BK / 4), kk = (v % (BK / 4)) * 4;                            \
      const int n = n0 + nn, k = (k0) + kk;                                            \
      if (n < N) rb[r] = nv_load4(B + (long)n * sbn + k, k, kend);                        \
    }                                                                                  \
  }                                                                                    \
}
// Store the fetched registers k-major into local buffer `buf`.
#define NV_STORE(buf)                                                                       \
_Pragma("unroll") for (int r = 0; r < A_PER; ++r) {                                    \
  const int v = tid + r * NT;                                                          \
  if (A_VECS % NT == 0 || v < A_VECS) {                                                \
    if (A_KCONTIG) {                                                                   \
      const int mm = v / (BK / 4), kk = (v % (BK / 4)) * 4;                            \
      As[buf][kk][SWZ(kk, mm)] = ra[r].s0;                                             \
      As[buf][kk + 1][SWZ(kk, mm)] = ra[r].s1;                                         \
      As[buf][kk + 2][SWZ(kk, mm)] = ra[r].s2;                                         \
      As[buf][kk + 3][SWZ(kk, mm)] = ra[r].s3;                                         \
    } else {                                                                           \
      const int kk = v / (BM / 4), mm = (v % (BM / 4)) * 4;                            \
      *(__local float4*)&As[buf][kk][SWZ(kk, mm)] = ra[r];                                    \
    }                                                                                  \
  }                                                                                    \
}                                                                                      \
_Pragma("unroll") for (int r = 0; r < B_PER; ++r) {                                    \
  const int v = tid + r * NT;                                                          \
  if (B_VECS % NT == 0 || v < B_VECS) {                                                \
    if (B_NCONTIG) {                                                                   \
      const int kk = v / (BN / 4), nn = (v % (BN / 4)) * 4;                            \
      *(__local float4*)&Bs[buf][kk][SWZ(kk, nn)] = rb[r];                                    \
    } else {                                                                           \
      const int nn = v / (BK / 4), kk = (v % (BK / 4)) * 4;                            \
      Bs[buf][kk][SWZ(kk, nn)] = rb[r].s0;                                             \
      Bs[buf][kk + 1][SWZ(kk, nn)] = rb[r].s1;                                         \
      Bs[buf][kk + 2][SWZ(kk, nn)] = rb[r].s2;                                         \
      Bs[buf][kk + 3][SWZ(kk, nn)] = rb[r].s3;                                         \
    }                                                                                  \
  }                                                                                    \
}

// Stream-K (STREAMK=1; a 1-D grid of dp_tiles + sk_groups groups; `batch` matrices' tiles
// numbered batch-major, then along M, then N): group g < dp_tiles computes tile g whole, as the
// plain grid does. The other sk_groups (as many as the device holds at once) share the remaining
// tiles' k-iterations evenly: sk group s takes iterations [s I / P, (s + 1) I / P) of their
// I = sk_tiles * ipt, in tile order, so that the grid's last waves end together instead of
// leaving units idle (1024x11008x4096 in 256x128 tiles is 344 tiles, 2.6 waves of 132). A tile
// whose iterations span groups is finished by the last of them to arrive (last_split, a counter
// a tile): the others leave their partial sums in the workspace, two slots a group (slot 0: the
// tile it starts inside, slot 1: the tile it ends inside). Every group of a tile arrives once; no
// group waits. The host (streamk_grid) gives every sk group at least one iteration.
#if STREAMK
#include "split_arrival.cl"  // last_split
// The sk group holding iteration x (relative to the sk tiles), for I iterations over P groups.
inline long sk_owner(long x, long I, long P) { return ((x + 1) * P - 1) / I; }
inline long sk_start(long s, long I, long P) { return s * I / P; }
// Group s's partial-sum slot for the tile whose iterations start at t0.
inline long sk_slot(long s, long t0, long I, long P) { return 2 * s + (sk_start(s, I, P) >= t0 ? 0 : 1); }
#endif

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void gemm_nv(int M, int N, int K, float alpha, float beta,
             __global const float* A, long a_off, int sam, int sak, long sab,
             __global const float* B, long b_off, int sbk, int sbn, long sbb,
             __global float* C, long c_off, int scm, long scb,
             __global const float* X, long x_off, int sxm, int sxn
#if STREAMK
             , long batch, __global float* skw, __global int* skc, long dp_tiles, long sk_groups
#endif
             ) {
  __local float As[2][BK][BM + PADA] __attribute__((aligned(16)));
  __local float Bs[2][BK][BN + PADB] __attribute__((aligned(16)));
  const int tid = get_local_id(0);
  const int tx = tid % LX, ty = tid / LX;
  __global const float* const A0 = A + a_off;
  __global const float* const B0 = B + b_off;
  float4 ra[A_PER], rb[B_PER];
  float acc[TM][TN];
#if STREAMK
  // The arrival's verdict, in the slices' memory (free between tiles): a 256x128 tile's 16-deep
  // swizzled slices fill NVIDIA's 48 KB of local memory to the byte.
  __local int* last_l = (__local int*)&As[0][0][0];
  const long tiles_n = (N + BN - 1) / BN, tiles_mn = (M + BM - 1) / BM * tiles_n;
  const long tiles = tiles_mn * batch;
  const long ipt = (K + BK - 1) / BK, gid = get_group_id(0);
  const long I = (tiles - dp_tiles) * ipt, sk = gid - dp_tiles;
  long it = gid < dp_tiles ? gid * ipt : dp_tiles * ipt + sk_start(sk, I, sk_groups);
  const long it1 = gid < dp_tiles ? it + ipt : dp_tiles * ipt + sk_start(sk + 1, I, sk_groups);
  while (it < it1) {
    const long tile = it / ipt;
    const long kit0 = it - tile * ipt, kit1 = min(ipt, kit0 + (it1 - it));
    it += kit1 - kit0;
    const long bt = tile / tiles_mn;
    const int m0 = (int)((tile - bt * tiles_mn) / tiles_n) * BM, n0 = (int)(tile % tiles_n) * BN;
    const int kbeg = (int)kit0 * BK, kend = min(K, (int)kit1 * BK);
    __global float* const Ct = C + c_off + bt * scb;
#else
  {
    const int n0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM;
#if SPLITK > 1
    // Split-K: dim 2 is batch * SPLITK; split s sums its BK-aligned K range into its own f32 slab
    // of the workspace C (slabs batch * scb apart), which gemm_nv_reduce adds up.
    const int split = get_group_id(2) % SPLITK;
    const long bt = get_group_id(2) / SPLITK;
    const int kchunk = ((K + SPLITK - 1) / SPLITK + BK - 1) / BK * BK;
    const int kbeg = min(K, split * kchunk), kend = min(K, kbeg + kchunk);
    __global float* const Ct = C + c_off + ((long)split * (get_num_groups(2) / SPLITK) + bt) * scb;
#else
    const long bt = get_group_id(2);
    const int kbeg = 0, kend = K;
    __global float* const Ct = C + c_off + bt * scb;
#endif
#endif
    A = A0 + bt * sab;
    B = B0 + bt * sbb;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    NV_FETCH(kbeg);
    NV_STORE(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    int cur = 0;
    for (int k0 = kbeg; k0 < kend; k0 += BK) {
      const bool more = k0 + BK < kend;
      if (more) { NV_FETCH(k0 + BK); }
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
        float a[TM], b[TN];
#pragma unroll
        for (int g = 0; g < TM / 4; ++g)
          vstore4(*(__local const float4*)&As[cur][kk][SWZ(kk, g * (BM * 4 / TM) + ty * 4)], 0, a + 4 * g);
#pragma unroll
        for (int g = 0; g < TN / 4; ++g)
          vstore4(*(__local const float4*)&Bs[cur][kk][SWZ(kk, g * (BN * 4 / TN) + tx * 4)], 0, b + 4 * g);
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
      }
      if (more) { NV_STORE(cur ^ 1); }
      barrier(CLK_LOCAL_MEM_FENCE);
      cur ^= 1;
    }

#if STREAMK
    bool write = kit0 == 0 && kit1 == ipt;
    if (!write) {
      // A share of tile u (of the sk tiles): publish it, and finish the tile if last to arrive.
      const long u = tile - dp_tiles, t0 = u * ipt, t1 = t0 + ipt;
      const long s_lo = sk_owner(t0, I, sk_groups), s_hi = sk_owner(t1 - 1, I, sk_groups);
      __global float* slot = skw + sk_slot(sk, t0, I, sk_groups) * (BM * BN);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) slot[(i * TN + j) * NT + tid] = acc[i][j];
      write = last_split(skc + u, s_hi - s_lo + 1, last_l);
      barrier(CLK_LOCAL_MEM_FENCE);  // the verdict read by all before the next tile's slices overwrite it
      if (write) {
        for (long o = s_lo; o <= s_hi; ++o) {
          if (o == sk) continue;
          volatile __global const float* other = skw + sk_slot(o, t0, I, sk_groups) * (BM * BN);
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] += other[(i * TN + j) * NT + tid];
        }
        if (tid == 0) skc[u] = 0;  // ready for the next launch
      }
    }
    if (write)
#endif
    {
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const int m = m0 + (i / 4) * (BM * 4 / TM) + ty * 4 + (i % 4);
        if (m < M) {
#pragma unroll
          for (int j = 0; j < TN; ++j) {
            const int n = n0 + (j / 4) * (BN * 4 / TN) + tx * 4 + (j % 4);
#if SPLITK > 1
            if (n < N) Ct[(long)m * scm + n] = acc[i][j];
#else
            if (n < N) Ct[(long)m * scm + n] = prism_epilogue(acc[i][j], alpha, beta, X, x_off, sxm, sxn, m, n);
#endif
          }
        }
      }
    }
  }
}
#endif  // BM

#ifdef REDUCE
// Split-K epilogue: C(m, n) = alpha * sum_s W[s](m, n) + beta * bias; W slabs are [batch, M, N]
// f32, `slab` floats apart. Global size (N, M, batch), any work-group size.
__kernel void gemm_nv_reduce(int M, int N, int S, long slab, __global const float* W, float alpha,
                             float beta, __global float* C, long c_off, int scm, long scb,
                             __global const float* X, long x_off, int sxm, int sxn) {
  const int n = get_global_id(0), m = get_global_id(1);
  const long bt = get_global_id(2);
  if (n >= N || m >= M) return;
  const long w = (bt * M + m) * N + n;
  float s = 0.0f;
  for (int i = 0; i < S; ++i) s += W[i * slab + w];
  C[c_off + bt * scb + (long)m * scm + n] = prism_epilogue(s, alpha, beta, X, x_off, sxm, sxn, m, n);
}
#endif  // REDUCE

#ifdef NB
// Small M, both A and B k-contiguous (sak == sbk == 1), K a multiple of 4 not required.
__kernel __attribute__((reqd_work_group_size(32 * WARPS, 1, 1)))
void gemm_nv_skinny(int M, int N, int K, float alpha, float beta,
                    __global const GT* A, long a_off, int sam, int sak, long sab,
                    __global const GT* B, long b_off, int sbk, int sbn, long sbb,
                    __global GT* C, long c_off, int scm, long scb,
                    __global const GT* X, long x_off, int sxm, int sxn) {
  __local float red[WARPS][MB * NB][33];
  const int lane = get_local_id(0) % 32, warp = get_local_id(0) / 32;
  const int n0 = (get_group_id(0) * WARPS + warp) * NB;
  const int m0 = get_group_id(1) * MB;
  const long bt = get_group_id(2);
  A += a_off + bt * sab;
  B += b_off + bt * sbb;
  C += c_off + bt * scb;
  float acc[MB][NB];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[i][j] = 0.0f;
  // Rows past M / columns past N read row 0 / column 0 (in bounds) and are never stored.
  __global const GT* brow[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) brow[j] = B + (long)(n0 + j < N ? n0 + j : 0) * sbn;
  __global const GT* arow[MB];
#pragma unroll
  for (int i = 0; i < MB; ++i) arow[i] = A + (long)(m0 + i < M ? m0 + i : 0) * sam;
  // 16-byte loads: a warp covers 32 * V16 elements of k per step (128 f32, 256 f16/bf16).
  const int kmain = K & ~(32 * V16 - 1);
#pragma unroll 2
  for (int k = lane * V16; k < kmain; k += 32 * V16) {
    VT16 b[NB];
#pragma unroll
    for (int j = 0; j < NB; ++j) b[j] = prism_load16(brow[j] + k);
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      const VT16 a = prism_load16(arow[i] + k);
#pragma unroll
      for (int j = 0; j < NB; ++j) acc[i][j] += prism_vdot16(a, b[j]);
    }
  }
  for (int k = kmain + lane; k < K; k += 32) {
#pragma unroll
    for (int i = 0; i < MB; ++i)
#pragma unroll
      for (int j = 0; j < NB; ++j) acc[i][j] = fma(PRISM_LOAD(arow[i] + k), PRISM_LOAD(brow[j] + k), acc[i][j]);
  }
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) red[warp][i * NB + j][lane] = acc[i][j];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int o = lane; o < MB * NB; o += 32) {
    float s = 0.0f;
#pragma unroll
    for (int l = 0; l < 32; ++l) s += red[warp][o][l];
    const int m = m0 + o / NB, n = n0 + o % NB;
    if (m < M && n < N)
      PRISM_STORE(C + (long)m * scm + n, prism_epilogue(s, alpha, beta, X, x_off, sxm, sxn, m, n));
  }
}
#endif  // NB
