// SPDX-License-Identifier: Apache-2.0
// post_attention for small M: the rest of a pre-norm decoder layer after its attention, as three
// GEMV stages over one block of M rows:
//   1. h = residual + attn . Wo^T                          (H rows, K = A)
//   2. a = silu(n . Wg^T) * (n . Wu^T), n = rms_norm(h, g)  (I gate/up row pairs, K = H)
//   3. out = h + a . Wd^T                                  (H rows, K = I)
// h lives in `out` (which may alias the residual: each element is read and written by the same
// work-item), a in a scratch block in the storage dtype (rounded as the unfused ops round it).
// A task is a run of output units of one stage for MB input rows. Variant 0: NB units, the
// work-group's WG items split K and reduce in local memory (after warp shuffles where they build).
// Variant 2: each of the group's WG / 32 warps owns NB units, its 32 lanes split K and reduce with
// warp shuffles (LANE_SHFL=1, NVIDIA's shfl.sync through inline PTX; local memory otherwise), so a
// task has no barrier between its loads and its stores.
//
// CHAIN=1: the three stages in one launch. Each work-group takes a ticket from an atomic counter
// and serves task `ticket` of the stages laid end to end; a stage-2 or stage-3 task first waits
// until every task of the stage before is counted done. Tickets are handed out in the order the
// groups start, so every task a group waits on is held by a group that is already running: no
// assumption on how many groups are resident at once or in which order the device starts them
// (the argument of decoupled look-back scans). The last group to leave zeroes the counters for the
// next launch.
// A stage-2 or stage-3 task's weights do not depend on the stage before, only its activations
// do: with PF_STEPS > 0 (GPUs, CHAIN=1, VEC16) each item loads its first PF_STEPS 16-byte steps of
// weight rows into registers before it waits, so the wait overlaps the weights' DRAM latency and
// bandwidth instead of preceding them.
// CHAIN=0: STAGE (1, 2 or 3) runs one stage with task = group id: three launches, the same
// arithmetic, so the two forms give identical results.
// Build defines: PRISM_DTYPE, HAS_BIAS=0 (gemm_common's epilogue, unused), MB, NB, WG (power of
// two), VEC16 (0/1: every operand row 16-byte aligned), CHAIN (0/1), STAGE (CHAIN=0), CHAIN_PTX
// (0/1: NVIDIA's fence.acq_rel.gpu, ld.relaxed.gpu and nanosleep through inline PTX), CHAIN_UNIFORM
// (0/1: CPU devices; no barrier under a branch on the stage), VARIANT (0/2), LANE_SHFL (0/1),
// CTR_STRIDE (ints between two counters), PF_STEPS (weight steps an item loads before its wait),
// QTYPE (block-quantized weights: 0 q8_0, 1 q4_0, 2 q4_1; unset for float weights), QA8 (with QTYPE:
// int8 activations for stages 2 and 3, below), Q_DP4A (QA8: dp4a through inline PTX), Q_PAIRS
// (QA8: the int8 stages read weight block pairs in 32-bit loads), QO (QA8: stage 1 on int8
// activations too; 1: after a quantize step Q0, 2: each stage-1 task quantizes its rows into
// local memory, QO_K = A long: chain_quantize_local), QF (QA8: the quantize steps Q1 and Q2
// inside stages 1 and 2, block by block: chain_quantize_done).
//
// QA8 (config qa=1): llama.cpp's scheme inside the block. Two quantize steps join the chain, so
// the order is 1, Q1, 2, Q2, 3 (five launches with CHAIN=0: STAGE 12 and 23 are the steps; the
// 7B-shaped q4_0 decode on the H200 ran 324-327 tokens/s against 293-294 with the steps run by
// the last group of stages 1 and 2 in three launches, benchmarks/RESULTS.md, "Issue 17, session 25"):
//   Q1: n's 32-blocks before the norm's scale, h * g, to int8 with one f32 scale a block, and
//      each block's sum of h^2;
//   Q2: the activations a to int8 the same way.
// Each step runs a group per WG blocks of a row (Q1 had run a group a row, summing the row's
// squares itself: 7.5 us of device time a layer at the 7B shape against Q2's 4.3,
// benchmarks/RESULTS.md, "Issue 17 and 12, session 28"). Stages 2 and 3 then walk those bytes against
// the weight slots with 4-byte integer dot products (q_dp4a), one float multiply-add per slot
// and row instead of a float dot per 4 weights; stage 2 sums the norm's mean square from the
// blocks' sums. QO (config qo=1) puts a step Q0 (STAGE 10) before stage 1, the attention output
// to int8 the same way, and stage 1 walks it as stages 2 and 3 do: the float walk of stage 1 took
// 15.4 us a layer for 9.4 MB of q4_0 weights at the 7B shape, the int8 one 10.6-11.0 plus Q0's
// 5.3-6.6 (QO=2, no Q0: 18-19, every task repeating the row's quantization). The quantized rows
// live in Scratch after the activations.

#include "gemm_common.cl"

#ifndef VEC16
#define VEC16 0
#endif
#ifndef CHAIN
#define CHAIN 1
#endif
#ifndef STAGE
#define STAGE 0
#endif
#ifndef CHAIN_PTX
#define CHAIN_PTX 0
#endif
#ifndef VARIANT
#define VARIANT 0
#endif
#ifndef CHAIN_UNIFORM
#define CHAIN_UNIFORM 0
#endif
#ifndef LANE_SHFL
#define LANE_SHFL 0
#endif
#ifndef PF_STEPS
#define PF_STEPS 0
#endif
#ifndef QO
#define QO 0
#endif
#ifndef QF
#define QF 0
#endif
#ifndef CTR_STRIDE
#error "CTR_STRIDE is set by kernels/ops/post_attention.cpp"
#endif
#if LANE_SHFL
#include "lane_shfl.cl"
#endif
// Weights: the storage dtype, or with QTYPE GGUF blocks (quant_common.cl) whose offsets and row
// strides the host gives in bytes. A task's members then walk 4-byte slots of the blocks
// (chain_qdots) where the float form walks 16-byte pieces; VEC16 and PF_STEPS stay 0.
#ifdef QTYPE
#include "quant_common.cl"
typedef uchar WT;
#if VEC16 || PF_STEPS
#error "quantized weights (QTYPE) take VEC16=0 and PF_STEPS=0"
#endif
#else
typedef GT WT;
#ifdef QA8
#error "int8 activations (QA8) take block-quantized weights (QTYPE)"
#endif
#endif
#if QO == 2 && !(defined(QA8) && Q_PAIRS && defined(QO_K))
#error "QO=2 (stage 1's activations quantized in local memory) takes QA8, Q_PAIRS and QO_K"
#endif
#if QF && !defined(QA8)
#error "QF (quantize steps inside stages 1 and 2) takes int8 activations (QA8)"
#endif
#if defined(QA8) && CHAIN && CHAIN_UNIFORM
#error "int8 activations (QA8) run chained on GPUs (CHAIN_UNIFORM=0) or as five launches (CHAIN=0)"
#endif

// A stage's int8 activations (QA8; q null otherwise): q [rows, K] bytes, d [rows, K / 32] block
// scales, s [rows, K / 32] each block's d * sum(q), and in stage 2 sq [rows, K / 32] h's blocks'
// sums of squares (null otherwise), from which the task sums the norm's mean square.
typedef struct {
  __global const uchar* q;
  __global const float* d;
  __global const float* s;
  __global const float* sq;
} chain_i8;

// QF's stage 2: member `me` of `team`'s share of each row's sum of squares, from h's blocks' sums.
inline void chain_block_squares(float* ss, int rows, int K, int me, int team, chain_i8 ia) {
  if (!ia.sq) return;
  const int blocks = K / 32;
#pragma unroll
  for (int i = 0; i < MB; ++i) {
    float v = 0.0f;
    if (i < rows)
      for (int b = me; b < blocks; b += team) v += ia.sq[(long)i * blocks + b];
    ss[i] = v;
  }
}
// Output units a task covers.
#if VARIANT == 2
#define UPT (WG / 32 * NB)
#else
#define UPT NB
#endif
// Without the chain's waits (CHAIN=0) a storing item loads its residual before the walk, so that
// the load's round trip overlaps the weights' instead of following the sums (with CHAIN=1 stage
// 3's residual is h, which stage 1 writes in the same launch).
#if !CHAIN
#define RES_EARLY_TASK (MB * NB <= WG)  // chain_task: an item stores at most one unit
#define RES_EARLY_WARP (MB * NB <= 32)  // chain_task_warp: a lane stores at most one unit
#else
#define RES_EARLY_TASK 0
#define RES_EARLY_WARP 0
#endif

// Counters, each on its own 128-byte line (CTR_STRIDE ints apart, from the host) so that the
// groups polling one do not queue behind the increments of another: [0] the ticket, [1] stage-1
// tasks done, [2] stage-2 tasks done, [3] groups finished.
#define CTR(i) (Ctr + (i) * CTR_STRIDE)
// QA8's steps count their tasks done in [4] (Q1), [5] (Q2) and [6] (Q0).
#define CTR_COUNT 7

inline void chain_fence(void) {
#if CHAIN_PTX
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
  mem_fence(CLK_GLOBAL_MEM_FENCE);
#endif
}

// The counter's current value: a relaxed load at GPU scope on NVIDIA (L2, no atomic unit), an
// atomic read elsewhere.
inline int chain_peek(volatile __global int* c) {
#if CHAIN_PTX
  int v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
  return v;
#else
  return atomic_add(c, 0);
#endif
}

// Item 0 waits until `target` tasks are done, backing off (NVIDIA: nanosleep from 64 to 128 ns)
// so that hundreds of waiting groups leave the memory system to the groups they wait on; the
// barrier then holds the whole group. The cap is what a waiter oversleeps the count by: 1024 ns
// cost qwen3-0.6b's bf16 decode 4-5% on the H200 against 64, 128 or 256 (alike), and no sleep at
// all 1-4% (benchmarks/RESULTS.md, "Issue 12, session 21").
inline void chain_acquire(volatile __global int* done, int target) {
  if (get_local_id(0) == 0) {
#if CHAIN_PTX
    uint ns = 64;
#endif
    while (chain_peek(done) < target) {
#if CHAIN_PTX
      asm volatile("nanosleep.u32 %0;" ::"r"(ns));
      ns = min(ns * 2, 128u);
#endif
    }
    chain_fence();
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
}

// Stage s's operands for the input rows from the caller's (res, x, out and act already point at
// them): F output units of K-long dots of a's rows (stride sa) with w's rows (stride sw), the
// residual r (stride sr) added in stages 1 and 3, the result into o (stride so). h lives in out,
// the activations in act (row stride I).
typedef struct {
  int F, K, sa, sw, sr, so;
  __global const GT* a;
  __global const WT* w;
  __global const GT* r;
  __global GT* o;
} chain_stage;

inline chain_stage chain_stage_of(int stage, int H, int A, int I, __global const GT* res, int srm,
                                  __global const GT* x, int sxm, __global const WT* wo, int swo,
                                  __global const WT* wgu, int swgu, __global const WT* wd, int swd, __global GT* out,
                                  int som, __global GT* act) {
  chain_stage s;
  s.F = stage == 2 ? I : H;
  s.K = stage == 1 ? A : stage == 2 ? H : I;
  s.a = stage == 1 ? x : stage == 2 ? out : act;
  s.sa = stage == 1 ? sxm : stage == 2 ? som : I;
  s.w = stage == 1 ? wo : stage == 2 ? wgu : wd;
  s.sw = stage == 1 ? swo : stage == 2 ? swgu : swd;
  s.r = stage == 1 ? res : out;
  s.sr = stage == 1 ? srm : som;
  s.o = stage == 2 ? act : out;
  s.so = stage == 2 ? I : som;
  return s;
}

// Units ju .. ju + NB's weight rows: gate row j and up row F + j (gated), or row j; j clamped
// to F - 1 (units past F read an in-bounds row and are never stored).
inline void chain_weight_rows(const __global WT** wrow, __global const WT* W, int sw, int F, int ju, int gated) {
  const int rpu = gated ? 2 : 1;
#pragma unroll
  for (int c = 0; c < NB; ++c) {
    const int j = min(ju + c, F - 1);
    wrow[rpu * c] = W + (long)j * sw;
    if (gated) wrow[rpu * c + 1] = W + (long)(F + j) * sw;
  }
}

#if VEC16 && PF_STEPS > 0
// A weight piece as loaded, converted where it is used: held across the wait, a 16-bit piece
// costs 4 registers instead of V16 (f16 converts at the load: vload_half8 reads global memory).
#if PRISM_DTYPE == 2
typedef uint4 RAW16;
inline RAW16 prism_raw16(__global const GT* p) { return *(__global const uint4*)p; }
inline VT16 prism_cvt16(RAW16 r) { return prism_bf16x8(r); }
#else
typedef VT16 RAW16;
inline RAW16 prism_raw16(__global const GT* p) { return prism_load16(p); }
inline VT16 prism_cvt16(RAW16 r) { return r; }
#endif
#endif

#if VEC16
// One 16-byte step at k of chain_dots: rows 0 .. rows of A against the unit pieces b.
inline void chain_step16(float (*acc)[2 * NB], float* ss, int rows, __global const GT* A, int sa, int k,
                         const VT16* b, __global const GT* G, int rpu, int norm) {
  VT16 g;
  if (norm) g = prism_load16(G + k);
#pragma unroll
  for (int i = 0; i < MB; ++i) {
    if (i < rows) {
      VT16 a = prism_load16(A + (long)i * sa + k);
      if (norm) {
        ss[i] += prism_vdot16(a, a);
        a *= g;
      }
#pragma unroll
      for (int c = 0; c < 2 * NB; ++c)
        if (c < rpu * NB) acc[i][c] += prism_vdot16(a, b[c]);
    }
  }
}
#endif

#ifdef QTYPE
// Two slots' weights (u0 and u0 + team, the second when below n): the loads of both slot walks,
// chain_qslots (float activations) and chain_qdots_i8.
typedef struct {
  uint v[2][2 * NB];
  float d[2][2 * NB], mn[2][2 * NB];
} chain_qw;

inline void chain_qload(chain_qw* w, int u0, int n, int team, const __global WT** wrow, int rpu) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int u = u0 + s * team, kb = u / SPB, q = u % SPB;
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) {
      if (u < n && c < rpu * NB) {
        const __global uchar* p = wrow[c] + (long)kb * QBYTES;
        w->v[s][c] = q_slot(p, 0, q);
        w->d[s][c] = q_scale(p);
        w->mn[s][c] = QTYPE == 2 ? q_min(p) : 0.0f;
      }
    }
  }
}

// Slots u0 and, when below n, u0 + team of the quantized weight rows (slot u % SPB of block
// u / SPB: 4 or 8 weights) against rows 0 .. rows of A: chain_dots' step for block-quantized
// weights. Every
// weight load of both slots is issued before any arithmetic: two slots at a time took the H200's
// q4_0 block at the 7B shape from 157 to 141 us and qwen3-0.6b's q4_0 decode up 2-4%
// (benchmarks/RESULTS.md, "Issue 17, session 22").
inline void chain_qslots(float (*acc)[2 * NB], float* ss, int rows, __global const GT* A, int sa, int u0, int team,
                         int n, const __global WT** wrow, __global const GT* G, int rpu, int norm) {
  chain_qw w;
  chain_qload(&w, u0, n, team, wrow, rpu);
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int u = u0 + s * team, k = u / SPB * 32 + 4 * (u % SPB);  // q4: the high nibbles at k + 16
    if (u >= n) break;
    float4 al[MB], ah[MB], gl = (float4)(1.0f), gh = (float4)(1.0f);
    if (norm) {
      gl = q_act4(G, k);
      if (QTYPE != 0) gh = q_act4(G, k + 16);
    }
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      al[i] = ah[i] = (float4)(0.0f);
      if (i < rows) {
        al[i] = q_act4(A + (long)i * sa, k);
        if (QTYPE != 0) ah[i] = q_act4(A + (long)i * sa, k + 16);
        if (norm) {
          ss[i] += dot(al[i], al[i]) + dot(ah[i], ah[i]);
          al[i] *= gl;
          ah[i] *= gh;
        }
      }
    }
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) {
      if (c < rpu * NB) {
        float4 wl, wh;
        q_slot_floats(w.v[s][c], &wl, &wh);
#pragma unroll
        for (int i = 0; i < MB; ++i) {
          if (i < rows) {
            acc[i][c] = fma(w.d[s][c], dot(al[i], wl) + (QTYPE != 0 ? dot(ah[i], wh) : 0.0f), acc[i][c]);
            if (QTYPE == 2) acc[i][c] = fma(w.mn[s][c], dot(al[i] + ah[i], (float4)(1.0f)), acc[i][c]);
          }
        }
      }
    }
  }
}

// Member `me` of `team`'s slots of K / 32 blocks, two at a time.
inline void chain_qdots(float (*acc)[2 * NB], float* ss, int rows, int K, int me, int team, __global const GT* A,
                        int sa, const __global WT** wrow, __global const GT* G, int rpu, int norm) {
  const int n = K / 32 * SPB;
  for (int u = me; u < n; u += 2 * team)
    chain_qslots(acc, ss, rows, A, sa, u, team, n, wrow, G, rpu, norm);
}

#ifdef QA8
// chain_qdots on int8 activations (ia): slot u's 4 weight bytes meet the 4 (q8_0) or 8 (q4: low
// nibbles at k, high ones at k + 16) activation bytes in one or two dp4a, scaled once by the two
// block scales; q4_0's -8 and q4_1's min take the slot's activation sum (a dp4a with ones), shared
// by the task's rows. Two slots at a time, both slots' weights loaded before their arithmetic.
// Loading the next pair before this pair's arithmetic (and the first before the chained wait)
// cost the 7B-shaped q4_0 block 16% on the H200 (85 -> 101 us; twice the weight registers, fewer
// groups resident; benchmarks/RESULTS.md, "Issue 17, session 25").
inline void chain_qdots_i8(float (*acc)[2 * NB], int rows, int K, int me, int team, chain_i8 ia,
                           const __global WT** wrow, int rpu) {
  const int n = K / 32 * SPB, blocks = K / 32;
  chain_qw cur;
  for (int u0 = me; u0 < n; u0 += 2 * team) {
    chain_qload(&cur, u0, n, team, wrow, rpu);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int u = u0 + s * team, kb = u / SPB, k = kb * 32 + 4 * (u % SPB);
      if (u >= n) break;
#pragma unroll
      for (int i = 0; i < MB; ++i) {
        if (i < rows) {
          const __global uchar* a = ia.q + (long)i * K + k;
          const uint al = *(const __global uint*)a;
          const uint ah = QTYPE != 0 ? *(const __global uint*)(a + 16) : 0u;
          const float da = ia.d[(long)i * blocks + kb];
          const int asum = QTYPE != 0 ? q_dp4a(ah, 0x01010101u, q_dp4a(al, 0x01010101u, 0)) : 0;
#pragma unroll
          for (int c = 0; c < 2 * NB; ++c) {
            if (c < rpu * NB) {
              const uint v = cur.v[s][c];
#if QTYPE == 0
              acc[i][c] = fma(cur.d[s][c] * da, (float)q_dp4a(v, al, 0), acc[i][c]);
#else
              const int dot = q_dp4a((v >> 4) & 0x0F0F0F0Fu, ah, q_dp4a(v & 0x0F0F0F0Fu, al, 0));
#if QTYPE == 1
              acc[i][c] = fma(cur.d[s][c] * da, (float)(dot - 8 * asum), acc[i][c]);
#else
              acc[i][c] = fma(da, fma(cur.d[s][c], (float)dot, cur.mn[s][c] * (float)asum), acc[i][c]);
#endif
#endif
            }
          }
        }
      }
    }
  }
}

#if Q_PAIRS
// chain_qdots_i8 with 32-bit weight loads (config qp=1; K % 64 == 0 and pair-aligned rows, which
// the host checks): member `me` of `team` takes block pairs me, me + team, ... of each weight
// row, a pair as PW words, and each block's activations as two uint4 with their d and d * sum(q)
// (quant_common.cl's q_pair_block). With lq (QO=2's stage 1) the activations come from the
// group's local copy instead (chain_quantize_local's layout), ia's from global memory otherwise.
inline void chain_qpairs_i8(float (*acc)[2 * NB], int rows, int K, int me, int team, chain_i8 ia,
                            __local const uchar* lq, const __global WT** wrow, int rpu) {
  const int pairs = K / 64, blocks = K / 32;
  for (int p = me; p < pairs; p += team) {
    uint w[2 * NB][PW + 1];
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) {
      if (c < rpu * NB) {
        const __global uint* src = (const __global uint*)(wrow[c] + (long)p * 2 * QBYTES);
#pragma unroll
        for (int u = 0; u < PW; ++u) w[c][u] = src[u];
        w[c][PW] = 0;
      }
    }
#pragma unroll
    for (int hb = 0; hb < 2; ++hb) {  // the pair's two blocks
      const int kb = 2 * p + hb;
#pragma unroll
      for (int i = 0; i < MB; ++i) {
        if (i < rows) {
          uint4 a0, a1;
          float da, sa;
          if (lq) {
            const __local uint4* a = (const __local uint4*)(lq + i * K + kb * 32);
            const __local float* f = (const __local float*)(lq + MB * K);
            a0 = a[0];
            a1 = a[1];
            da = f[i * blocks + kb];
            sa = f[MB * blocks + i * blocks + kb];
          } else {
            const __global uint4* a = (const __global uint4*)(ia.q + (long)i * K + (long)kb * 32);
            a0 = a[0];
            a1 = a[1];
            da = ia.d[(long)i * blocks + kb];
            sa = ia.s[(long)i * blocks + kb];
          }
#pragma unroll
          for (int c = 0; c < 2 * NB; ++c)
            if (c < rpu * NB) acc[i][c] = q_pair_block(w[c], hb, a0, a1, da, sa, acc[i][c]);
        }
      }
    }
  }
#if QO == 2 && CHAIN_UNIFORM
  // CPU devices (three launches, so every item of the group is here): a barrier between the walk's
  // reads of the local rows and the reduction's stores. PoCL 5.0 otherwise built stage 1 wrong at
  // nb >= 2 (every output off, normalized squared error ~0.16, with the local rows and the
  // reduction's array apart); PoCL 3.1 built it right either way.
  barrier(CLK_LOCAL_MEM_FENCE);
#endif
}
#endif

// q8_quantize_block into global memory: the bytes at q + 32 b, the scale in d[b], d * sum(q) in s[b].
inline float chain_quantize_block(int b, __global const GT* x, __global const GT* g, __global uchar* q,
                                  __global float* d, __global float* s) {
  uint qw[8];
  float dq, sq;
  const float ss = q8_quantize_block(b, x, g, qw, &dq, &sq);
  __global uint4* o = (__global uint4*)(q + b * 32);
  o[0] = (uint4)(qw[0], qw[1], qw[2], qw[3]);
  o[1] = (uint4)(qw[4], qw[5], qw[6], qw[7]);
  d[b] = dq;
  s[b] = sq;
  return ss;
}

#if QO == 2
// QO=2's stage 1: the group quantizes its rows 0 .. rows of x (row stride sx, K = QO_K long)
// into its local copy lq: bytes [MB, QO_K], then the scales d [MB, QO_K / 32] and d * sum(q)
// s [MB, QO_K / 32] (what chain_qpairs_i8 reads with lq), and waits for every item. Every task
// repeats the quantization of the same rows (L2 reads: the attention output is QO_K values a
// row), so no step of its own and no launch between the attention and stage 1.
#define QO_LOCAL_UINT4 (MB * QO_K / 16 + MB * QO_K / 64)
inline void chain_quantize_local(int rows, __global const GT* x, int sx, __local uchar* lq) {
  const int blocks = QO_K / 32;
  __local float* f = (__local float*)(lq + MB * QO_K);
  for (int e = get_local_id(0); e < rows * blocks; e += WG) {
    const int i = e / blocks, b = e % blocks;
    uint qw[8];
    float dq, sq;
    q8_quantize_block(b, x + (long)i * sx, 0, qw, &dq, &sq);
    __local uint4* o = (__local uint4*)(lq + i * QO_K + b * 32);
    o[0] = (uint4)(qw[0], qw[1], qw[2], qw[3]);
    o[1] = (uint4)(qw[4], qw[5], qw[6], qw[7]);
    f[i * blocks + b] = dq;
    f[MB * blocks + i * blocks + b] = sq;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}
#endif

// Q0 / Q1 / Q2: blocks b0 + t, b0 + t + WG, ... below b1 of x (one row) through
// chain_quantize_block, each block's sum of squares into sq[b] where sq is given (Q1: stage 2's
// norm sums them, as with QF).
inline void chain_quantize(int b0, int b1, __global const GT* x, __global const GT* g, __global uchar* q,
                           __global float* d, __global float* s, __global float* sq) {
  for (int b = b0 + get_local_id(0); b < b1; b += WG) {
    const float ss = chain_quantize_block(b, x, g, q, d, s);
    if (sq) sq[b] = ss;
  }
}

#if QF
// QF (config qf=1): the quantize steps inside stages 1 and 2, block by block. A task that has
// stored units j0 .. j1 of rows m0 .. m0 + rows of x (h or a, row m0 at x, row stride sx) adds
// them to each 32-block's counter (done [M, F / 32]: zero between launches); the task whose units
// complete a block quantizes it (one item a block: chain_quantize_block, the same arithmetic as
// Q1 and Q2), leaves the block's sum of squares in sq (h's blocks; stage 2's norm scale sums them)
// and zeroes the counter. No step waits on a whole stage or runs on one group: the five launches
// become three, and the chained form has no quantize tasks. Every item of the group calls it.
#define QF_LIST (1 + MB * (UPT / 32 + 2))
inline void chain_quantize_done(int F, int m0, int rows, int j0, int j1, __global const GT* x, int sx,
                                __global const GT* g, __global uchar* q, __global float* d, __global float* s,
                                __global float* sq, volatile __global int* done, __local int* list) {
  const int t = get_local_id(0), nb = F / 32;
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);  // every store of the task issued
#if UPT % 32 == 0
  // Tasks of whole blocks (UPT a multiple of 32: j0 starts a block and j1 ends one, F being whole
  // blocks): the task's own stores complete its blocks, visible to the group after the barrier, so
  // it quantizes them without counters or fences (done stays zero).
  const int own = (j1 - j0) / 32;
  for (int e = t; e < rows * own; e += WG) {
    const int i = e / own, b = j0 / 32 + e % own, c = (m0 + i) * nb + b;
    const float ss = chain_quantize_block(b, x + (long)i * sx, g, q + (long)(m0 + i) * F, d + (long)(m0 + i) * nb,
                                          s + (long)(m0 + i) * nb);
    if (sq) sq[c] = ss;
  }
  (void)done;
  (void)list;
#else
  if (t == 0) {
    chain_fence();  // the task's stores before its counts
    int n = 0;
    for (int i = 0; i < rows; ++i) {
      for (int b = j0 / 32; b * 32 < j1; ++b) {
        const int c = (m0 + i) * nb + b, k = min(j1, b * 32 + 32) - max(j0, b * 32);
        if (atomic_add(done + c, k) + k == 32) list[1 + n++] = c;
      }
    }
    list[0] = n;
    if (n) chain_fence();  // the other tasks' stores before this task's loads
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int n = list[0];
  for (int e = t; e < n; e += WG) {
    const int c = list[1 + e], m = c / nb, b = c % nb;
    const float ss = chain_quantize_block(b, x + (long)(m - m0) * sx, g, q + (long)m * F, d + (long)m * nb,
                                          s + (long)m * nb);
    if (sq) sq[c] = ss;
    atomic_xchg(done + c, 0);
  }
#endif  // UPT % 32
}
#endif
#endif  // QA8
#endif  // QTYPE

// The dots of one team (a work-group, or a warp) for output units ju .. ju + NB (clamped to F: units
// past F read row F - 1, in bounds, and are never stored) of rows 0 .. rows of A [rows, K] (row
// stride sa): member `me` of `team` sums k = me, me + team, ... (16-byte pieces with VEC16) into
// acc[i][unit pieces] and, with norm, row i's squares into ss[i]. gated: unit j reads weight rows
// j and F + j; else row j. norm: A is read as A * g. The chained GPU form first waits until
// `target` tasks of the stage before are done (count `wait`; 0: no wait), every item of the group
// together, after its first PF_STEPS weight steps are loaded.
inline void chain_dots(float (*acc)[2 * NB], float* ss, int rows, int F, int K, int ju, int me, int team,
                       __global const GT* A, int sa, __global const WT* W, int sw, __global const GT* G, int gated,
                       int norm, chain_i8 ia, __local const uchar* lq, volatile __global int* wait, int target) {
  const int rpu = gated ? 2 : 1;
  const __global WT* wrow[2 * NB];
  chain_weight_rows(wrow, W, sw, F, ju, gated);
#pragma unroll
  for (int i = 0; i < MB; ++i) {
    ss[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c) acc[i][c] = 0.0f;
  }
#if VEC16 && PF_STEPS > 0
  RAW16 pre[PF_STEPS][2 * NB];
#pragma unroll
  for (int s = 0; s < PF_STEPS; ++s) {
    const int k = (me + s * team) * V16;
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c)
      if (c < rpu * NB && k + V16 <= K) pre[s][c] = prism_raw16(wrow[c] + k);
  }
#endif
#if CHAIN && !CHAIN_UNIFORM
  if (target > 0) chain_acquire(wait, target);  // uniform over the group
#endif
#ifdef QTYPE
#ifdef QA8
  if (ia.q || lq)  // stages 2 and 3 (the norm's squares were summed by Q1), and 1 with QO
#if Q_PAIRS
    chain_qpairs_i8(acc, rows, K, me, team, ia, lq, wrow, rpu);
#else
    chain_qdots_i8(acc, rows, K, me, team, ia, wrow, rpu);
#endif
  else
#endif
    chain_qdots(acc, ss, rows, K, me, team, A, sa, wrow, G, rpu, norm);
#else
#if VEC16
#if PF_STEPS > 0
#pragma unroll
  for (int s = 0; s < PF_STEPS; ++s) {
    const int k = (me + s * team) * V16;
    if (k + V16 <= K) {
      VT16 b[2 * NB];
#pragma unroll
      for (int c = 0; c < 2 * NB; ++c)
        if (c < rpu * NB) b[c] = prism_cvt16(pre[s][c]);
      chain_step16(acc, ss, rows, A, sa, k, b, G, rpu, norm);
    }
  }
#endif
  for (int k = (me + PF_STEPS * team) * V16; k + V16 <= K; k += team * V16) {
    VT16 b[2 * NB];
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c)
      if (c < rpu * NB) b[c] = prism_load16(wrow[c] + k);
    chain_step16(acc, ss, rows, A, sa, k, b, G, rpu, norm);
  }
  for (int k = K / V16 * V16 + me; k < K; k += team) {
#else
  for (int k = me; k < K; k += team) {
#endif
    float b[2 * NB];
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c)
      if (c < rpu * NB) b[c] = PRISM_LOAD(wrow[c] + k);
#pragma unroll
    for (int i = 0; i < MB; ++i) {
      if (i < rows) {
        float a = PRISM_LOAD(A + (long)i * sa + k);
        if (norm) {
          ss[i] = fma(a, a, ss[i]);
          a *= PRISM_LOAD(G + k);
        }
#pragma unroll
        for (int c = 0; c < 2 * NB; ++c)
          if (c < rpu * NB) acc[i][c] = fma(a, b[c], acc[i][c]);
      }
    }
  }
#endif  // QTYPE
}

// The caller's partials into column col of red (where store): rows 0 .. MB * 2 * NB the unit
// sums, MB * 2 * NB + i row i's squares (norm); then a barrier, which every item reaches.
inline void chain_spill(__local float (*red)[WG], float (*acc)[2 * NB], float* ss, int col, int gated, int norm,
                        bool store) {
  const int rpu = gated ? 2 : 1;
  if (store) {
#pragma unroll
    for (int i = 0; i < MB; ++i) {
#pragma unroll
      for (int c = 0; c < 2 * NB; ++c)
        if (c < rpu * NB) red[i * 2 * NB + c][col] = acc[i][c];
      if (norm) red[MB * 2 * NB + i][col] = ss[i];
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

// One task: output units j0 .. j0 + NB for rows 0 .. rows (chain_dots' arguments), the group's
// sums reduced in local memory. gated: silu(gate) * up; else the dot, plus R[i, j] (the
// residual) when resid. norm: the dots are scaled by rsqrt(mean A^2 + eps), the mean square
// summed from the same loads.
#if LANE_SHFL
// Every unit's sum (and with norm, each row's squares) round the warp by shuffles: every lane
// ends with the warp's totals.
inline void chain_warp_sums(float (*acc)[2 * NB], float* ss, int rpu, int norm) {
#pragma unroll
  for (int i = 0; i < MB; ++i) {
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c)
      if (c < rpu * NB)
        for (int o = 16; o > 0; o >>= 1) acc[i][c] += lane_xor(acc[i][c], o);
    if (norm)
      for (int o = 16; o > 0; o >>= 1) ss[i] += lane_xor(ss[i], o);
  }
}
#endif

// WARP_REDUCE (variant 0 with 64 or more items where warp shuffles build): each warp sums its
// lanes' partials by shuffles and its lane 0 leaves them in column w of red, so a task's reduction
// is one barrier instead of log2(WG); chain_total adds the warps' columns. qwen3-0.6b's bf16
// decode on the H200: +6-7% (benchmarks/RESULTS.md, "Issue 12, session 21"); with one warp the
// 5 shuffles a value cost more than the 5 barriers they replace.
#define WARP_REDUCE (VARIANT == 0 && LANE_SHFL && WG % 32 == 0 && WG >= 64)
inline float chain_total(__local float (*red)[WG], int row) {
#if WARP_REDUCE
  float v = 0.0f;
#pragma unroll
  for (int w = 0; w < WG / 32; ++w) v += red[row][w];
  return v;
#else
  return red[row][0];
#endif
}

inline void chain_task(__local float (*red)[WG], int rows, int F, int K, int j0, __global const GT* A, int sa,
                       __global const WT* W, int sw, __global const GT* G, float eps, int gated, int norm,
                       int resid, __global const GT* R, int sr, __global GT* O, int so, chain_i8 ia,
                       __local const uchar* lq, volatile __global int* wait, int target) {
  const int t = get_local_id(0);
  const int rpu = gated ? 2 : 1;
  float acc[MB][2 * NB];
  float ss[MB];
  // Item t < MB * NB stores unit t % NB of row t / NB (the loop below, when MB * NB <= WG).
  float rv = 0.0f;
#if RES_EARLY_TASK
  if (resid && t < MB * NB && t / NB < rows && j0 + t % NB < F)
    rv = PRISM_LOAD(R + (long)(t / NB) * sr + j0 + t % NB);
#endif
  chain_dots(acc, ss, rows, F, K, j0, t, WG, A, sa, W, sw, G, gated, norm && !ia.q, ia, lq, wait, target);
  chain_block_squares(ss, rows, K, t, WG, ia);
#if WARP_REDUCE
  chain_warp_sums(acc, ss, rpu, norm);
  chain_spill(red, acc, ss, t / 32, gated, norm, t % 32 == 0);  // each warp's lane 0
#else
  chain_spill(red, acc, ss, t, gated, norm, true);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (t < s) {
#pragma unroll
      for (int r = 0; r < MB * 2 * NB + MB; ++r)
        if (r < MB * 2 * NB ? (r % (2 * NB)) < rpu * NB : norm) red[r][t] += red[r][t + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#endif
  for (int r = t; r < MB * NB; r += WG) {
    const int i = r / NB, c = r % NB, j = j0 + c;
    if (i < rows && j < F) {
      const float scale = !norm ? 1.0f : rsqrt(chain_total(red, MB * 2 * NB + i) / (float)K + eps);
      float v;
      if (gated) {
        const float g = chain_total(red, i * 2 * NB + 2 * c) * scale, u = chain_total(red, i * 2 * NB + 2 * c + 1) * scale;
        v = g / (1.0f + exp(-g)) * u;
      } else {
        v = chain_total(red, i * 2 * NB + c) * scale;
#if RES_EARLY_TASK
        if (resid) v += rv;
#else
        if (resid) v += PRISM_LOAD(R + (long)i * sr + j);
#endif
      }
      PRISM_STORE(O + (long)i * so + j, v);
    }
  }
}

#if VARIANT == 2
// One task of variant 2: warp w of the group owns units j0 + w * NB .. + NB (clamped to F); its
// lanes split K (16-byte pieces with VEC16), then each unit's sum goes round the warp. Arguments
// as chain_task's; red holds the lanes' partials where the shuffle form is missing.
inline void chain_task_warp(__local float (*red)[WG], int rows, int F, int K, int j0, __global const GT* A,
                            int sa, __global const WT* W, int sw, __global const GT* G, float eps, int gated,
                            int norm, int resid, __global const GT* R, int sr, __global GT* O, int so, chain_i8 ia,
                            __local const uchar* lq, volatile __global int* wait, int target) {
  const int t = get_local_id(0), lane = t % 32;
  const int ju = j0 + t / 32 * NB;
  const int rpu = gated ? 2 : 1;
  float acc[MB][2 * NB];
  float ss[MB];
  // Lane i * NB + c stores row i's unit c (below; one unit a lane when MB * NB <= 32).
  float rv = 0.0f;
#if RES_EARLY_WARP
  if (resid && lane < MB * NB && lane / NB < rows && ju + lane % NB < F)
    rv = PRISM_LOAD(R + (long)(lane / NB) * sr + ju + lane % NB);
#endif
  chain_dots(acc, ss, rows, F, K, ju, lane, 32, A, sa, W, sw, G, gated, norm && !ia.q, ia, lq, wait, target);
  chain_block_squares(ss, rows, K, lane, 32, ia);
  // Sums round the warp: every lane ends with the totals.
#if LANE_SHFL
  chain_warp_sums(acc, ss, rpu, norm);
#else
  // Each lane sums its warp's 32 slots of every row.
  chain_spill(red, acc, ss, t, gated, norm, true);
  const int w0 = t - lane;
#pragma unroll
  for (int i = 0; i < MB; ++i) {
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c)
      if (c < rpu * NB) {
        float v = 0.0f;
        for (int l = 0; l < 32; ++l) v += red[i * 2 * NB + c][w0 + l];
        acc[i][c] = v;
      }
    if (norm) {
      float v = 0.0f;
      for (int l = 0; l < 32; ++l) v += red[MB * 2 * NB + i][w0 + l];
      ss[i] = v;
    }
  }
#endif
  // Lane i * NB + c stores row i's unit c.
#pragma unroll
  for (int i = 0; i < MB; ++i) {
#pragma unroll
    for (int c = 0; c < NB; ++c) {
      const int j = ju + c;
      if (lane == (i * NB + c) % 32 && i < rows && j < F) {
        const float scale = !norm ? 1.0f : rsqrt(ss[i] / (float)K + eps);
        float v;
        if (gated) {
          const float g = acc[i][2 * c] * scale, u = acc[i][2 * c + 1] * scale;
          v = g / (1.0f + exp(-g)) * u;
        } else {
          v = acc[i][c] * scale;
#if RES_EARLY_WARP
          if (resid) v += rv;
#else
          if (resid) v += PRISM_LOAD(R + (long)i * sr + j);
#endif
        }
        PRISM_STORE(O + (long)i * so + j, v);
      }
    }
  }
}
#define CHAIN_TASK chain_task_warp
#else
#define CHAIN_TASK chain_task
#endif

// The chained form is post_attention_block; CHAIN=0 names each launch by its stage
// (post_attention_stage1, _stage12, _stage2, _stage23, _stage3), so that a profile's kernel table
// (prism-llm's decode_kernels) times the stages apart.
#if CHAIN
#define CHAIN_KERNEL post_attention_block
#else
#define CHAIN_KERNEL GEMM_CAT(post_attention_stage, STAGE)
#endif
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void CHAIN_KERNEL(int M, int H, int A, int I, __global const GT* Res, long res_off, int srm,
                          __global const GT* X, long x_off, int sxm, __global const WT* Wo, long wo_off, int swo,
                          __global const GT* G, long g_off, float eps, __global const WT* Wgu, long wgu_off,
                          int swgu, __global const WT* Wd, long wd_off, int swd, __global GT* Out, long out_off,
                          int som, __global float* Scratch, __global int* Ctr) {
  __local float red[MB * 2 * NB + MB][WG];
  __local int ticket;
#if QO == 2
  __local uint4 lqx[QO_LOCAL_UINT4];  // stage 1's int8 activations (chain_quantize_local)
  __local const uchar* lq1 = (__local const uchar*)lqx;
#else
  __local const uchar* lq1 = 0;
#endif
  __global GT* act = (__global GT*)Scratch;  // [M, I], row stride I
  const int row_blocks = (M + MB - 1) / MB;
  const int t1 = (H + UPT - 1) / UPT * row_blocks, t2 = (I + UPT - 1) / UPT * row_blocks;
#ifdef QA8
  // The quantize steps' tasks, a group per WG blocks of a row: Q0 (QO) the attention output x,
  // Q1 n = h * g, Q2 the activations a. Their rows follow the activations in Scratch, bytes
  // first (16-byte aligned rows: A, H and I are whole blocks): qh [M, H], qa [M, I], qx [M, A]
  // (QO), then floats dh, sh, sq [M, H / 32] (sq: h's blocks' sums of squares, from which stage 2
  // sums the norm's mean square), da, sa [M, I / 32], dx, sx [M, A / 32] (QO)
  // (kernels/ops/post_attention.cpp sizes it).
  const int q0_per_row = (A / 32 + WG - 1) / WG, q1_per_row = (H / 32 + WG - 1) / WG,
            q2_per_row = (I / 32 + WG - 1) / WG;
  __global uchar* qh = (__global uchar*)(Scratch + (long)M * I);
  __global uchar* qa = qh + (long)M * H;
  __global uchar* qx = qa + (long)M * I;
  __global float* dh = (__global float*)(qx + (QO == 1 ? (long)M * A : 0));
  __global float* sh = dh + (long)M * (H / 32);
  __global float* sqv = sh + (long)M * (H / 32);
  __global float* da = sqv + (long)M * (H / 32);
  __global float* sa = da + (long)M * (I / 32);
  __global float* dx = sa + (long)M * (I / 32);
  __global float* sx = dx + (long)M * (A / 32);
  const int nq0 = QO == 1 ? M * q0_per_row : 0;
#if QF
  // QF: Q1 and Q2 run inside stages 1 and 2; the blocks' counters [M, H / 32] then [M, I / 32]
  // follow the chain's.
  volatile __global int* done1 = Ctr + CTR_COUNT * CTR_STRIDE;
  volatile __global int* done2 = done1 + (long)M * (H / 32);
  __local int qf_list[QF_LIST];
  const int nq1 = 0, nq2 = 0;
#else
  const int nq1 = M * q1_per_row, nq2 = M * q2_per_row;
#endif
#else
  const int nq0 = 0, nq1 = 0, nq2 = 0;
#endif
#if CHAIN
  if (get_local_id(0) == 0) ticket = atomic_inc(CTR(0));
  barrier(CLK_LOCAL_MEM_FENCE);
  // Tickets serve the stages laid end to end: Q0, 1, Q1, 2, Q2, 3 (the Q steps only with QA8, Q0
  // with QO).
  int task = ticket, stage;
  if (task < nq0) {
    stage = 10;
  } else if ((task -= nq0) < t1) {
    stage = 1;
  } else if ((task -= t1) < nq1) {
    stage = 12;
  } else if ((task -= nq1) < t2) {
    stage = 2;
  } else if ((task -= t2) < nq2) {
    stage = 23;
  } else {
    task -= nq2;
    stage = 3;
  }
#else
  const int stage = STAGE;
  const int task = get_group_id(0);
#endif
#ifdef QA8
  if (stage == 10 || stage == 12 || stage == 23) {
#if CHAIN
    if (stage != 10) chain_acquire(stage == 12 ? CTR(1) : CTR(2), stage == 12 ? t1 : t2);
#endif
    const int per_row = stage == 10 ? q0_per_row : stage == 12 ? q1_per_row : q2_per_row;
    const int m = task / per_row, b0 = task % per_row * WG;
    if (stage == 10) {
      chain_quantize(b0, min(b0 + WG, A / 32), X + x_off + (long)m * sxm, 0, qx + (long)m * A,
                     dx + (long)m * (A / 32), sx + (long)m * (A / 32), 0);
    } else if (stage == 12) {
      chain_quantize(b0, min(b0 + WG, H / 32), Out + out_off + (long)m * som, G + g_off, qh + (long)m * H,
                     dh + (long)m * (H / 32), sh + (long)m * (H / 32), sqv + (long)m * (H / 32));
    } else {
      chain_quantize(b0, min(b0 + WG, I / 32), act + (long)m * I, 0, qa + (long)m * I, da + (long)m * (I / 32),
                     sa + (long)m * (I / 32), 0);
    }
  } else {
#endif
  const int units = stage == 2 ? (I + UPT - 1) / UPT : (H + UPT - 1) / UPT;
  const int m0 = task / units * MB, j0 = task % units * UPT;
  const int rows = min(MB, M - m0);
  __global GT* out = Out + out_off + (long)m0 * som;
  act += (long)m0 * I;
  // Stages 2 and 3's int8 activations (QA8), and stage 1's with QO; none otherwise.
  chain_i8 ia = {0, 0, 0, 0};
#ifdef QA8
  if (stage == 1 && QO == 1) {
    ia.q = qx + (long)m0 * A;
    ia.d = dx + (long)m0 * (A / 32);
    ia.s = sx + (long)m0 * (A / 32);
  } else if (stage == 2) {
    ia.q = qh + (long)m0 * H;
    ia.d = dh + (long)m0 * (H / 32);
    ia.s = sh + (long)m0 * (H / 32);
    ia.sq = sqv + (long)m0 * (H / 32);
  } else if (stage == 3) {
    ia.q = qa + (long)m0 * I;
    ia.d = da + (long)m0 * (I / 32);
    ia.s = sa + (long)m0 * (I / 32);
  }
#endif
#if CHAIN && !CHAIN_UNIFORM
  // GPUs: one branch per stage, each task built with its stage's constants (the compiler
  // specializes each: measured 7-11% faster decode on the H100 than the uniform form below).
  // Stages 2 and 3 wait inside the task, after their first weight loads (PF_STEPS): on the stage
  // before, or with QA8 on its quantize step.
  if (stage == 1) {
#if QO == 2
    chain_quantize_local(rows, X + x_off + (long)m0 * sxm, sxm, (__local uchar*)lqx);
#endif
    CHAIN_TASK(red, rows, H, A, j0, X + x_off + (long)m0 * sxm, sxm, Wo + wo_off, swo, G, eps, 0, 0, 1,
               Res + res_off + (long)m0 * srm, srm, out, som, ia, lq1, CTR(6), nq0);
  } else if (stage == 2) {
    CHAIN_TASK(red, rows, I, H, j0, out, som, Wgu + wgu_off, swgu, G + g_off, eps, 1, 1, 0, out, som, act, I, ia, 0,
               nq1 ? CTR(4) : CTR(1), nq1 ? nq1 : t1);
  } else {
    CHAIN_TASK(red, rows, H, I, j0, act, I, Wd + wd_off, swd, G, eps, 0, 0, 1, out, som, out, som, ia, 0,
               nq2 ? CTR(5) : CTR(2), nq2 ? nq2 : t2);
  }
#else
#if CHAIN
  // CPUs (CHAIN_UNIFORM=1): every barrier of the group is reached whatever its stage. The stage
  // picks operands, not code paths, so no barrier sits under a branch on the ticket: PoCL cannot
  // tell such a branch is uniform across the group and built it wrong (a crash with 16-item
  // groups, a stage reading the one before too early in about 1 of 30 runs otherwise). Stage 1
  // passes the wait at once (a count is never below 0).
  chain_acquire(stage == 3 ? CTR(2) : CTR(1), stage == 1 ? 0 : stage == 2 ? t1 : t2);
#endif
#if QO == 2
  if (stage == 1) chain_quantize_local(rows, X + x_off + (long)m0 * sxm, sxm, (__local uchar*)lqx);  // CHAIN=0
#endif
  const chain_stage s = chain_stage_of(stage, H, A, I, Res + res_off + (long)m0 * srm, srm, X + x_off + (long)m0 * sxm,
                                       sxm, Wo + wo_off, swo, Wgu + wgu_off, swgu, Wd + wd_off, swd, out, som, act);
  CHAIN_TASK(red, rows, s.F, s.K, j0, s.a, s.sa, s.w, s.sw, G + g_off, eps, stage == 2, stage == 2, stage != 2, s.r,
             s.sr, s.o, s.so, ia, stage == 1 ? lq1 : 0, Ctr, 0);
#endif
#if QF
  // Both forms: the task's stored units of h (stage 1) or a (stage 2) count toward their blocks
  // (uniform over the group: the stage is the group's).
  if (stage == 1)
    chain_quantize_done(H, m0, rows, j0, min(j0 + UPT, H), out, som, G + g_off, qh, dh, sh, sqv, done1, qf_list);
  else if (stage == 2)
    chain_quantize_done(I, m0, rows, j0, min(j0 + UPT, I), act, I, 0, qa, da, sa, 0, done2, qf_list);
#endif
#ifdef QA8
  }
#endif
#if CHAIN
  // Stages 1 and 2 and the quantize steps count their task done; the last group to leave zeroes
  // the counters.
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0) {
    chain_fence();
    if (stage != 3) atomic_inc(CTR(stage == 10 ? 6 : stage == 12 ? 4 : stage == 23 ? 5 : stage));
    if (atomic_inc(CTR(3)) == 2 * t1 + t2 + nq0 + nq1 + nq2 - 1)
      for (int i = 0; i < CTR_COUNT; ++i) atomic_xchg(CTR(i), 0);
  }
#endif
}

// The CPU form (config variant 1, CHAIN=0 only): one work-item per NB output units of one input
// row, sweeping K VW-wide (PoCL vectorizes each item's loop; the k split above costs a CPU a
// barrier per step). With the norm, every item sums the row's squares itself, as
// gemv_gated.cl's gemv_decode_rows does.
#if VW == 1
typedef float chain_floatv;
#else
typedef GEMM_CAT(float, VW) chain_floatv;
#endif
__kernel void post_attention_rows(int M, int H, int A, int I, __global const GT* Res, long res_off, int srm,
                                  __global const GT* X, long x_off, int sxm, __global const WT* Wo, long wo_off,
                                  int swo, __global const GT* G, long g_off, float eps, __global const WT* Wgu,
                                  long wgu_off, int swgu, __global const WT* Wd, long wd_off, int swd,
                                  __global GT* Out, long out_off, int som, __global float* Scratch,
                                  __global int* Ctr) {
  const int gated = STAGE == 2, norm = STAGE == 2, resid = STAGE != 2, rpu = STAGE == 2 ? 2 : 1;
  const int j0 = get_global_id(0) * NB, m = get_global_id(1);
  // The host passes a stage only the buffers it reads, the others as NULL (post_attention.cpp), so
  // only those are offset (the conditions are constants: no arithmetic on NULL is emitted).
  __global GT* act = STAGE != 1 ? (__global GT*)Scratch + (long)m * I : 0;
  __global GT* out = Out + out_off + (long)m * som;
  const chain_stage s = chain_stage_of(
      STAGE, H, A, I, STAGE == 1 ? Res + res_off + (long)m * srm : 0, srm, STAGE == 1 ? X + x_off + (long)m * sxm : 0,
      sxm, STAGE == 1 ? Wo + wo_off : 0, swo, STAGE == 2 ? Wgu + wgu_off : 0, swgu, STAGE == 3 ? Wd + wd_off : 0, swd,
      out, som, act);
  const int F = s.F, K = s.K;
  if (j0 >= F || m >= M) return;
  const __global GT* a = s.a;
  const __global WT* wrow[2 * NB];
  chain_weight_rows(wrow, s.w, s.sw, F, j0, gated);
#ifdef QTYPE
  // Block-quantized weights: the GPU forms' slot walk over the whole row (one row of A).
  float qacc[1][2 * NB], ss = 0.0f;
#pragma unroll
  for (int c = 0; c < 2 * NB; ++c) qacc[0][c] = 0.0f;
  chain_qdots(qacc, &ss, 1, K, 0, 1, a, 0, wrow, STAGE == 2 ? G + g_off : 0, rpu, norm);
  const float* acc = qacc[0];
#else
  chain_floatv accv[2 * NB];
#pragma unroll
  for (int c = 0; c < 2 * NB; ++c) accv[c] = (chain_floatv)(0.0f);
  chain_floatv ssv = (chain_floatv)(0.0f);
  int k = 0;
  for (; k + VW <= K; k += VW) {
    chain_floatv x = PRISM_LOADV(a + k);
    if (norm) {
      ssv = fma(x, x, ssv);
      x *= PRISM_LOADV(G + g_off + k);
    }
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c)
      if (c < rpu * NB) accv[c] = fma(x, PRISM_LOADV(wrow[c] + k), accv[c]);
  }
  float acc[2 * NB];
#pragma unroll
  for (int c = 0; c < 2 * NB; ++c) acc[c] = prism_hsum(accv[c]);
  float ss = prism_hsum(ssv);
  for (; k < K; ++k) {
    float x = PRISM_LOAD(a + k);
    if (norm) {
      ss = fma(x, x, ss);
      x *= PRISM_LOAD(G + g_off + k);
    }
#pragma unroll
    for (int c = 0; c < 2 * NB; ++c)
      if (c < rpu * NB) acc[c] = fma(x, PRISM_LOAD(wrow[c] + k), acc[c]);
  }
#endif  // QTYPE
  const float scale = norm ? rsqrt(ss / (float)K + eps) : 1.0f;
#pragma unroll
  for (int c = 0; c < NB; ++c) {
    const int j = j0 + c;
    if (j < F) {
      float v;
      if (gated) {
        const float g = acc[2 * c] * scale, u = acc[2 * c + 1] * scale;
        v = g / (1.0f + exp(-g)) * u;
      } else {
        v = acc[c] + (resid ? PRISM_LOAD(s.r + j) : 0.0f);
      }
      PRISM_STORE(s.o + j, v);
    }
  }
}
