// prism weight-only quantized GEMM: C[m, n] = alpha * sum_k A[m, k] * W[n, k] (+ beta * X(m, n)),
// A in f32/f16/bf16 (PRISM_DTYPE, rows k-contiguous), W in GGUF blocks of 32 weights along k,
// accumulation in f32. A weight row is K/32 consecutive blocks, rows `swn` blocks apart; QTYPE
// and the block layouts are quant_common.cl's (q8_0, q4_0, q4_1). A block contributes
// d * (a . q) (+ m * sum(a) for q4_1): the scale leaves the inner product.
// Kernels:
// - gemm_q_cpu (CPUs): a work-item owns RM rows x RN columns; per block it dequantizes each of its
//   RN weight blocks once into two float16 registers and multiplies them with RM activation
//   vectors, accumulating float16 lanes (reduced once at the end). No barriers, no local memory.
// - quantize_rows_q8 + gemm_q_cpu_i8 (CPUs, config qa=1; llama.cpp's scheme): the first kernel
//   quantizes each 32-block of each activation row to int8 (d = absmax / 127, q = rint(a / d)) into
//   a workspace laid out as q [M, K] bytes, then d [M, K/32] and s = d * sum(q) [M, K/32] floats.
//   The second takes integer block dot products (AVX2: vpmaddubsw + vpmaddwd, as llama.cpp;
//   elsewhere shorts and vpmaddwd's pattern), then adds d_a * d_w * that (float8 accumulators,
//   reduced at the end); q4_0's -8 and q4_1's m are carried by s.
//   Same RM x RN work-item tiling as gemm_q_cpu. Built with QA_FUSED (qa=2, M <= 8) the second
//   kernel runs alone: its first work-group quantizes the rows (q_quantize_rows). Built with
//   Q_GATED (linear_silu_and_mul) each work-item walks RN gate rows, then their RN up rows, and
//   stores silu(gate) * up for RN columns (gemm_q_cpu's Q_GATED, on float activations: one
//   pair's two rows at once, RN = 2).
// - gemm_q_gemv (GPUs, small M): a work-group of WG items owns NB columns of MB rows; item t
//   takes blocks t, t + WG, ... (neighbours read neighbouring blocks), then a local-memory tree.
// - gemm_q_rows (GPUs, small M: decode): a warp-sized team of 32 items owns NB weight rows; the
//   team walks each row in 4-byte slots of quantized values, lane l taking slots l, l + 32, ...,
//   so one team-wide load reads 128 contiguous weight bytes (scales aside) and one float4 of
//   activations per lane serves all NB rows; then a local-memory tree per row. WARPS teams per
//   work-group, MB activation rows.
// - gemm_q_tiled (GPUs, large M): TM x TN tiles of C, one 32-wide k block at a time: the A tile
//   and the TN weight blocks, dequantized, are staged in local memory; each item owns WM x WN.
//   Built with QA8 (qa=1), it walks quantize_rows_q8's int8 activations instead, with integer
//   dot products of 4 bytes (dp4a through inline PTX on NVIDIA, Q_DP4A=1); gemm_q_pairs_i8
//   (qa=1, qp=1) reads each lane's pair of blocks in 32-bit loads.
// Build defines: PRISM_DTYPE, QTYPE, HAS_BIAS, and RM, RN (cpu; QA8 for the int8 pair) / MB, NB,
// WG (gemv) / MB, NB, WARPS, A_VEC4 (rows: activation rows 16-byte aligned in groups of 4; QA8
// and Q_DP4A for the int8 form) / TM, TN, WM, WN (tiled).

#define VW 16
#include "gemm_common.cl"  // dtype load/store macros, epilogue (resolved by build_kernel)

// q4_0's offset of 8: the CPU kernel leaves it out of the values and subtracts 8 * sum(a) per
// block instead (one scalar per row, shared by every column, instead of two vector ops each).
#ifdef RM
#define Q4_OFFSET 0.0f
#else
#define Q4_OFFSET 8.0f
#endif

#include "quant_common.cl"  // QBYTES, q_values, q_scale, q_min

// The CPU kernels walk each weight row front to back; on x86 they ask for the line 1 KiB ahead,
// which took the 49152 x 576 q8_0 GEMV from 0.62-0.69 to 0.77-0.81 of the paired read on two AVX2
// cores (benchmarks/RESULTS.md, "Issue 17, session 11"); the hardware prefetcher alone kept
// fewer lines in flight than one core's row stream needs. With Q_PF_FAR (the host's, for the int8
// walk's long rows: K >= 2048) the distance is an eighth of the work-group's bytes, between 1 KiB
// and 8 KiB (q_rows_pf): a group's rows are one stretch of memory that one PoCL thread walks row
// after row, so the line ahead may be a later row's, but never past the group's last row, which
// another thread walks. 8 KiB ahead took the [16384, 4096] GEMV from 0.57 to 0.66 of the read
// (q4_0, with the x86 dot-product walk below) and 0.70 to 0.76 (q8_0); rows of 576 lost with it
// (benchmarks/RESULTS.md, "Issue 17, session 39").
// The float walk (gemm_q_cpu) is never built with Q_PF_FAR and keeps the 1 KiB line
// (Q_PREFETCH_NEAR).
#if defined(__clang__) && defined(__x86_64__) && defined(__SSE2__)  // a CPU compiler, not a GPU one
#define Q_PREFETCH_NEAR(p) __builtin_prefetch((p) + 1024)
#if defined(Q_PF_FAR) && Q_PF_FAR
#define Q_PREFETCH(p, pf) \
  if ((p) + (pf).dist < (pf).end) __builtin_prefetch((p) + (pf).dist)
// Where the caller knows p + dist stays before the group's end (a whole row does).
#define Q_PREFETCH_IN(p, pf) __builtin_prefetch((p) + (pf).dist)
#else
#define Q_PREFETCH(p, pf) Q_PREFETCH_NEAR(p)
#define Q_PREFETCH_IN(p, pf) Q_PREFETCH_NEAR(p)
#endif
#else
#define Q_PREFETCH_NEAR(p)
#define Q_PREFETCH(p, pf)
#define Q_PREFETCH_IN(p, pf)
#endif
typedef struct {
  const __global uchar* end;
  long dist;
} q_pf;
// This work-group's weight rows' end and the prefetch distance (RN rows an item, rows of swn
// blocks from w_off).
inline q_pf q_rows_pf(const __global uchar* W, long w_off, long swn, int N, int rn) {
  const long rows = (long)get_local_size(0) * rn, n0 = (long)get_group_id(0) * rows, n1 = min(n0 + rows, (long)N);
  q_pf pf = {W + (w_off + n1 * swn) * QBYTES, clamp((n1 - n0) * swn * QBYTES / 8, 1024L, 8192L)};
  return pf;
}

// Q_GATED's output, silu(g) * u = g * sigmoid(g) * u, the sigmoid from e^-|g| by prism_expn
// (prelude.cl: an f32 exp for x <= 0 in plain arithmetic; the builtin's call per work-item cost
// the small preset's eight gated GEMVs ~50 us a token on two cores).
inline float q_silu_mul(float g, float u) {
  const float e = prism_expn(-fabs(g)), r = 1.0f / (1.0f + e);
  return g * (g >= 0.0f ? r : e * r) * u;
}

#ifdef RM
// The CPU kernels' group size, when the host names it (Q_LX: the config's wg, or fewer items
// where the row count is smaller).
#ifdef Q_LX
#define Q_CPU_GROUP __attribute__((reqd_work_group_size(Q_LX, 1, 1)))
#else
#define Q_CPU_GROUP
#endif

// The CPU kernels' output columns (NO) and a work-item's first (n0). With Q_GATED
// (linear_silu_and_mul) the gate row n and the up row NO + n of the [2 NO, K] weight give the
// output's column n, silu(gate) * up, and a work-item owns Q_PAIRS columns: gemm_q_cpu walks one
// pair's two rows together (RN = 2, Q_PAIRS = 1), gemm_q_cpu_i8 its RN gate rows, then their RN
// up rows (Q_PAIRS = RN). Q_ROWS: the weight rows a work-item walks.
#ifdef Q_GATED
#define Q_COLS(N) ((N) / 2)
#define Q_N0 ((int)get_global_id(0) * Q_PAIRS)
#define Q_ROWS (2 * Q_PAIRS)
#else
#define Q_COLS(N) (N)
#define Q_N0 ((int)get_global_id(0) * RN)
#define Q_ROWS RN
#endif

// The CPU kernels' stores: v[i][j] as output (m0 + i, n0 + j) through the epilogue; with Q_GATED
// silu(v[i][j]) * u[i][j] as output (m0 + i, n0 + j) for the work-item's Q_PAIRS columns, v the
// gate row n0 + j's sums and u the up row NO + n0 + j's.
inline void q_store(float (*v)[RN], float (*u)[RN], int M, int N, int NO, int m0, int n0, float alpha, float beta,
                    __global GT* C, long c_off, int scm, __global const GT* X, long x_off, int sxm, int sxn) {
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int m = m0 + i;
    if (m >= M) continue;
#ifdef Q_GATED
#pragma unroll
    for (int j = 0; j < Q_PAIRS; ++j)
      if (n0 + j < NO) {
        const float gv = prism_epilogue(v[i][j], alpha, beta, X, x_off, sxm, sxn, m, n0 + j);
        const float uv = prism_epilogue(u[i][j], alpha, beta, X, x_off, sxm, sxn, m, NO + n0 + j);
        PRISM_STORE(C + c_off + (long)m * scm + n0 + j, q_silu_mul(gv, uv));
      }
#else
#pragma unroll
    for (int j = 0; j < RN; ++j)
      if (n0 + j < N)
        PRISM_STORE(C + c_off + (long)m * scm + n0 + j,
                    prism_epilogue(v[i][j], alpha, beta, X, x_off, sxm, sxn, m, n0 + j));
#endif
  }
}
#endif

#ifdef RM
__kernel Q_CPU_GROUP void gemm_q_cpu(int M, int N, int K, float alpha, float beta, __global const GT* A, long a_off,
                         int sam, __global const uchar* W, long w_off, long swn, __global GT* C, long c_off,
                         int scm, __global const GT* X, long x_off, int sxm, int sxn) {
  const int NO = Q_COLS(N), n0 = Q_N0;
  const int m0 = get_global_id(1) * RM;
  if (n0 >= NO || m0 >= M) return;
  const int blocks = K / 32;
  const __global GT* a[RM];
  const __global uchar* w[RN];
#pragma unroll
  for (int i = 0; i < RM; ++i) a[i] = A + a_off + (long)min(m0 + i, M - 1) * sam;
#ifdef Q_GATED
  w[0] = W + (w_off + (long)n0 * swn) * QBYTES;
  w[1] = w[0] + (long)NO * swn * QBYTES;
#else
#pragma unroll
  for (int j = 0; j < RN; ++j) w[j] = W + (w_off + (long)min(n0 + j, N - 1) * swn) * QBYTES;
#endif
  float16 acc[RM][RN];
#if QTYPE != 0
  float accm[RM][RN];  // q4_1: m * sum(a); q4_0: -8 d * sum(a)
#endif
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      acc[i][j] = (float16)0.0f;
#if QTYPE != 0
      accm[i][j] = 0.0f;
#endif
    }
  for (int kb = 0; kb < blocks; ++kb) {
    float16 alo[RM], ahi[RM];
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      alo[i] = PRISM_LOADV(a[i] + kb * 32);
      ahi[i] = PRISM_LOADV(a[i] + kb * 32 + 16);
    }
#if QTYPE != 0
    float asum[RM];
#pragma unroll
    for (int i = 0; i < RM; ++i) asum[i] = prism_hsum16(alo[i] + ahi[i]);
#endif
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      const __global uchar* p = w[j] + (long)kb * QBYTES;
      Q_PREFETCH_NEAR(p);
      float16 lo, hi;
      q_values(p, &lo, &hi);
      const float ds = q_scale(p);
      const float16 d = (float16)ds;
#if QTYPE == 2
      const float m = q_min(p);
#elif QTYPE == 1
      const float m = -8.0f * ds;
#endif
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        acc[i][j] = fma(d, fma(alo[i], lo, ahi[i] * hi), acc[i][j]);
#if QTYPE != 0
        accm[i][j] = fma(m, asum[i], accm[i][j]);
#endif
      }
    }
  }
  float v[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      v[i][j] = prism_hsum16(acc[i][j]);
#if QTYPE != 0
      v[i][j] += accm[i][j];
#endif
    }
#ifdef Q_GATED
  float u[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i) u[i][0] = v[i][1];
  q_store(v, u, M, N, NO, m0, n0, alpha, beta, C, c_off, scm, X, x_off, sxm, sxn);
#else
  q_store(v, v, M, N, NO, m0, n0, alpha, beta, C, c_off, scm, X, x_off, sxm, sxn);
#endif
}
#endif

#ifdef QNORM
// rms_norm_linear's norm, one work-group of QNORM items (a power of two >= K / 32) per row:
// item b loads 32-block b of the row at a, the blocks' sums of squares meet in `part`, and the
// block comes back scaled by rsqrt(mean square + eps) and the norm weight g. False for the items
// past the row's blocks (after the group's barriers).
// A 32-block's sum of squares (lo: its k 0..15, hi: k 16..31), in the one order both quantizers use.
inline float q_block_sumsq(float16 l, float16 h) {
  const float16 sq = l * l + h * h;
  const float8 sq8 = sq.lo + sq.hi;
  const float4 sq4 = sq8.lo + sq8.hi;
  return sq4.s0 + sq4.s1 + sq4.s2 + sq4.s3;
}

inline bool q_norm_block(const __global GT* a, const __global GT* g, int K, float eps, __local float* part,
                         float16* lo, float16* hi) {
  const int b = get_local_id(0);
  const bool on = b < K / 32;
  const __global GT* p = a + (on ? b : 0) * 32;
  float16 l = PRISM_LOADV(p), h = PRISM_LOADV(p + 16);
  part[b] = on ? q_block_sumsq(l, h) : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = QNORM / 2; w > 0; w >>= 1) {
    if (b < w) part[b] += part[b + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (!on) return false;
  const float r = rsqrt(part[0] / (float)K + eps);
  *lo = l * PRISM_LOADV(g + b * 32) * r;
  *hi = h * PRISM_LOADV(g + b * 32 + 16) * r;
  return true;
}

// 16 floats to storage (rounded to nearest even).
inline void q_store16(float16 v, __global GT* y) {
#if PRISM_DTYPE == 0
  vstore16(v, 0, y);
#elif PRISM_DTYPE == 1
  vstore_half16_rte(v, 0, y);
#else
  const ushort8 l = (ushort8)(prism_to_bf16(v.s0), prism_to_bf16(v.s1), prism_to_bf16(v.s2), prism_to_bf16(v.s3),
                              prism_to_bf16(v.s4), prism_to_bf16(v.s5), prism_to_bf16(v.s6), prism_to_bf16(v.s7));
  const ushort8 h = (ushort8)(prism_to_bf16(v.s8), prism_to_bf16(v.s9), prism_to_bf16(v.sa), prism_to_bf16(v.sb),
                              prism_to_bf16(v.sc), prism_to_bf16(v.sd), prism_to_bf16(v.se), prism_to_bf16(v.sf));
  vstore16((ushort16)(l, h), 0, y);
#endif
}

// The norm alone, for the float-activation kernels (rms_norm_linear at qa=0): normalized rows in
// the storage dtype to Y [M, K] (as rms_norm would store them).
__kernel __attribute__((reqd_work_group_size(QNORM, 1, 1))) void quant_norm_rows(
    int M, int K, __global const GT* A, long a_off, int sam, __global GT* Y, __global const GT* G, long g_off,
    float eps) {
  __local float part[QNORM];
  const int b = get_local_id(0), m = get_group_id(1);
  float16 lo, hi;
  if (!q_norm_block(A + a_off + (long)m * sam, G + g_off, K, eps, part, &lo, &hi)) return;
  __global GT* y = Y + (long)m * K + b * 32;
  q_store16(lo, y);
  q_store16(hi, y + 16);
}
#endif

#ifdef QA8
// On AVX-512 the CPU kernel walks q4_0/q4_1 four blocks a 512-bit register (Q_G4), in every tile
// (decode's 1 x 1 and prefill's up to 16 pairs of activation and weight rows): each activation
// row's int8 bytes are then laid out in groups of four blocks (128 bytes: the four blocks' k
// 0..15, then their k 16..31) up to the last whole group, and block by block after it. Both
// kernels of a build see the same Q_G4, so they agree on the layout. -DPRISM_Q_G4=0
// (PRISM_CL_OPTIONS) builds the block-by-block walk instead, as on a host without AVX-512BW.
#if defined(RM) && defined(__AVX512BW__) && defined(__F16C__) && defined(__clang__) && QTYPE != 0 && \
    !(defined(PRISM_Q_G4) && PRISM_Q_G4 == 0)
#define Q_G4 1
#else
#define Q_G4 0
#endif
// q8_0's form of it (Q_P8): two blocks a 512-bit register. The activation layout stays block by
// block (two blocks are 64 contiguous bytes); -DPRISM_Q_G4=0 turns it off with Q_G4.
#if defined(RM) && defined(__AVX512BW__) && defined(__clang__) && QTYPE == 0 && \
    !(defined(PRISM_Q_G4) && PRISM_Q_G4 == 0)
#define Q_P8 1
#else
#define Q_P8 0
#endif
// Byte offsets, within an activation row of the workspace, of block b's k 0..15 and k 16..31.
inline int q_lo_at(int b, int blocks) {
  return Q_G4 && b < (blocks & ~3) ? (b >> 2) * 128 + (b & 3) * 16 : b * 32;
}
inline int q_hi_at(int b, int blocks) {
  return Q_G4 && b < (blocks & ~3) ? (b >> 2) * 128 + 64 + (b & 3) * 16 : b * 32 + 16;
}

// Block b of activation row m (lo: its k 0..15, hi: k 16..31) into the workspace QA: d = absmax /
// 127, q = rint(a / d), and s = d * sum(q).
inline void q8_store_block(float16 lo, float16 hi, int m, int b, int M, int K, __global uchar* QA) {
  const int blocks = K / 32;
  const float16 mx = fmax(fabs(lo), fabs(hi));
  const float8 m8 = fmax(mx.lo, mx.hi);
  const float4 m4 = fmax(m8.lo, m8.hi);
  const float2 m2 = fmax(m4.lo, m4.hi);
  const float d = fmax(m2.s0, m2.s1) * (1.0f / 127.0f);
  const float id = d > 0.0f ? 1.0f / d : 0.0f;
  const char16 ql = convert_char16_sat_rte(lo * id), qh = convert_char16_sat_rte(hi * id);
  __global uchar* q = QA + (long)m * K;
  vstore16(as_uchar16(ql), 0, q + q_lo_at(b, blocks));
  vstore16(as_uchar16(qh), 0, q + q_hi_at(b, blocks));
  const int16 s16 = convert_int16(ql) + convert_int16(qh);
  const int8 s8 = s16.lo + s16.hi;
  const int4 s4 = s8.lo + s8.hi;
  const int sum = s4.s0 + s4.s1 + s4.s2 + s4.s3;
  __global float* ds = (__global float*)(QA + (long)M * K);
  ds[(long)m * blocks + b] = d;
  ds[(long)M * blocks + (long)m * blocks + b] = d * (float)sum;
}

#if defined(RM) && defined(QA_FUSED)
// qa=2: gemm_q_cpu_i8 with no quantize launch. The first work-group to arrive quantizes every
// activation row into the workspace, one block after another as quantize_rows_q8's items would
// (with QNORM the row's norm first, its blocks' sums of squares added in that kernel's tree
// order, so that both forms give the same bytes); the groups that arrive while it works wait for
// it. flags[0] is the claim, flags[1] "ready", flags[2] counts the groups that have seen it: the
// last of them zeroes all three for the next launch (split_workspace's counters start at zero).
// One group runs the quantization while the others run, so nothing waits on a group that has
// not started.
inline void q_quantize_rows(int M, int K, const __global GT* A, long a_off, int sam, __global uchar* QA
#ifdef QNORM
                            ,
                            const __global GT* G, float eps
#endif
) {
  const int blocks = K / 32;
  for (int m = 0; m < M; ++m) {
    const __global GT* a = A + a_off + (long)m * sam;
#ifdef QNORM
    float part[QNORM];
    for (int b = 0; b < QNORM; ++b)
      part[b] = b < blocks ? q_block_sumsq(PRISM_LOADV(a + b * 32), PRISM_LOADV(a + b * 32 + 16)) : 0.0f;
    for (int w = QNORM / 2; w > 0; w >>= 1)
      for (int b = 0; b < w; ++b) part[b] += part[b + w];
    const float r = rsqrt(part[0] / (float)K + eps);
#endif
    for (int b = 0; b < blocks; ++b) {
      float16 lo = PRISM_LOADV(a + b * 32), hi = PRISM_LOADV(a + b * 32 + 16);
#ifdef QNORM
      lo = lo * PRISM_LOADV(G + b * 32) * r;
      hi = hi * PRISM_LOADV(G + b * 32 + 16) * r;
#endif
      q8_store_block(lo, hi, m, b, M, K, QA);
    }
  }
}
#endif

// One work-item per (32-block, row) of A: see the workspace layout at the top. With QNORM (the
// group size, a power of two >= K / 32; rms_norm_linear) the row is RMS-normalized first: one
// work-group per row, the blocks' sums of squares meet in local memory, and each block is scaled
// by rsqrt(mean square + eps) and the norm weight G before it is quantized.
#ifdef QNORM
__kernel __attribute__((reqd_work_group_size(QNORM, 1, 1))) void quantize_rows_q8(
    int M, int K, __global const GT* A, long a_off, int sam, __global uchar* QA, __global const GT* G, long g_off,
    float eps) {
  __local float part[QNORM];
  const int b = get_local_id(0), m = get_group_id(1);
  const int blocks = K / 32;
  float16 lo, hi;
  if (!q_norm_block(A + a_off + (long)m * sam, G + g_off, K, eps, part, &lo, &hi)) return;
#else
__kernel void quantize_rows_q8(int M, int K, __global const GT* A, long a_off, int sam, __global uchar* QA) {
  const int b = get_global_id(0), m = get_global_id(1);
  const int blocks = K / 32;
  if (b >= blocks || m >= M) return;
  const __global GT* a = A + a_off + (long)m * sam + b * 32;
  const float16 lo = PRISM_LOADV(a), hi = PRISM_LOADV(a + 16);
#endif
  q8_store_block(lo, hi, m, b, M, K, QA);
}

#ifdef RM  // gemm_q_cpu_i8 and its block dot products (the rows kernel's int8 form is below)
// The integer dot product of the weight block at p with an activation block (alo: k 0..15,
// ahi: k 16..31), as eight partial sums. q4_0 leaves out its -8 (carried by s).
#if defined(__AVX2__) && defined(__clang__)
// x86 with AVX2 (PoCL's CPU targets): llama.cpp's instruction pair, written with clang's x86
// builtins because PoCL 3.1's LLVM does not form vpmaddubsw from portable code (checked with
// objdump, 2026-11-23). vpmaddubsw multiplies 32 unsigned by 32 signed bytes and adds
// neighbours to shorts (here at most 2 * 128 * 127, no saturation); vpmaddwd with ones adds
// neighbouring shorts to ints. q8_0 moves its weight's sign onto the activation (vpsignb).
typedef char q_v32qi __attribute__((vector_size(32)));
typedef short q_v16hi __attribute__((vector_size(32)));
#define Q_CAT32(x, y)                                                                                         \
  ((q_v32qi)__builtin_shufflevector((x), (y), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, \
                                    19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31))
inline int8 q_madd32(q_v32qi u, q_v32qi s) {
  const q_v16hi p = __builtin_ia32_pmaddubsw256(u, s);
  return as_int8(__builtin_ia32_pmaddwd256(p, (q_v16hi)((short16)1)));
}

// Activation block kb's 32 int8 (k 0..31) in one register. Block by block (no Q_G4) they are 32
// contiguous bytes: one load, where two 16-byte loads and an insert came out of LLVM before.
typedef q_v32qi q_act;
typedef char q_v32qi_u __attribute__((vector_size(32), aligned(1)));
inline q_act q_act_at(const __global uchar* q, int kb, int blocks) {
  if (Q_G4)
    return Q_CAT32(as_char16(vload16(0, q + q_lo_at(kb, blocks))),
                   as_char16(vload16(0, q + q_hi_at(kb, blocks))));
  return *(const __global q_v32qi_u*)(q + kb * 32);
}

// The f16 at p in all 8 lanes: vpbroadcastw from memory, then vcvtph2ps, where a scalar
// conversion took a load, a move and the conversion, and the product's broadcast one more.
#ifdef __F16C__
typedef short q_v8hi __attribute__((vector_size(16)));
typedef float q_v8sf8 __attribute__((vector_size(32)));
inline float8 q_half8_at(const __global uchar* p) {
  return as_float8((q_v8sf8)__builtin_ia32_vcvtph2ps256((q_v8hi)((short8)(*(const __global short*)p))));
}
#define Q_HALF8_AT(p) q_half8_at(p)
#endif

inline int8 q_dot(const __global uchar* p, q_act a) {
#if QTYPE == 0
  const q_v32qi w = Q_CAT32(as_char16(vload16(0, p + 2)), as_char16(vload16(0, p + 18)));
  return q_madd32(__builtin_ia32_psignb256(w, w), __builtin_ia32_psignb256(a, w));
#else
  // Both halves of the 16 bytes in one register (vbroadcasti128), the high half shifted by 4
  // per dword (vpsrlvd), then the nibble mask: 3 instructions where split-and-insert took 5.
  const uchar16 q = vload16(0, p + (QTYPE == 1 ? 2 : 4));
  const ulong2 q2 = as_ulong2(q);
  const uint8 both = as_uint8((ulong4)(q2, q2)) >> (uint8)(0, 0, 0, 0, 4, 4, 4, 4);
  return q_madd32((q_v32qi)(both & (uint8)0x0F0F0F0Fu), a);
#endif
}
#else
// Portable: widened to shorts, products of neighbours summed to ints (vpmaddwd's pattern).
inline int8 q_madd16(short16 a, short16 w) {
  return convert_int8(a.even) * convert_int8(w.even) + convert_int8(a.odd) * convert_int8(w.odd);
}

typedef struct {
  char16 lo, hi;  // k 0..15, k 16..31
} q_act;
inline q_act q_act_at(const __global uchar* q, int kb, int blocks) {
  q_act a = {as_char16(vload16(0, q + q_lo_at(kb, blocks))),
             as_char16(vload16(0, q + q_hi_at(kb, blocks)))};
  return a;
}

inline int8 q_dot(const __global uchar* p, q_act a) {
#if QTYPE == 0
  const short16 wl = convert_short16(as_char16(vload16(0, p + 2)));
  const short16 wh = convert_short16(as_char16(vload16(0, p + 18)));
#else
  const uchar16 q = vload16(0, p + (QTYPE == 1 ? 2 : 4));
  const short16 wl = convert_short16(q & (uchar16)0xF), wh = convert_short16(q >> (uchar16)4);
#endif
  return q_madd16(convert_short16(a.lo), wl) + q_madd16(convert_short16(a.hi), wh);
}
#endif
#ifndef Q_HALF8_AT  // no F16C: the block's f16 scale in all 8 lanes by a scalar conversion
#define Q_HALF8_AT(p) ((float8)q_half_at(p))
#endif

// One k block of gemm_q_cpu_i8: each (activation row, weight row) pair's integer block dot
// product, scaled by d_a * d_w into acc; accm takes q4_0's d_w * s_a (times -8 at the end) or
// q4_1's m * s_a. `fetch`: Q_FETCH_NONE asks for no line ahead (the block before it did: two q4
// blocks are 36 bytes, under a line), Q_FETCH_CHECKED for one if it lies within the group's rows,
// Q_FETCH_IN for one unchecked (the caller knows it does). On an AVX2 host (no Q_G4) decode's
// two-block step took 57 instructions before the activation's one load, the broadcast scale
// (Q_HALF8_AT) and one prefetch a q4 pair (37: over 9 interleaved runs on a 2-core AVX2 EPYC the
// [16384, 4096] GEMV went from a median 0.60 of the read to 0.68 for q4_0 and 0.63 to 0.70 for
// q4_1, q8_0 0.88 to 0.91), then unchecked prefetches on the rows that end inside the group's
// (32, no branch but the loop's: over 6 more pairs q4_0 0.71 -> 0.78, q4_1 0.70 -> 0.79, q8_0
// level; benchmarks/RESULTS.md, "Session 51").
#define Q_FETCH_NONE 0
#define Q_FETCH_CHECKED 1
#define Q_FETCH_IN 2
// Without a 512-bit walk for the type (a compiler without AVX-512BW: an AVX2 host, a CPU that is
// not x86, a GPU running variant 0) every tile walks block by block, and q_i8_block is inlined
// into its walk and the walk into the kernel (Q_BLOCK_INLINE, Q_INLINE_WALK). As calls,
// prefill's tiles (up to 4 x 4 rows) kept their accumulators in memory, loaded and stored each
// block, and decoded each weight block once per activation row: LLVM could not tell that the
// accumulators' stores leave the weight alone. Inlined, each weight block is decoded once a tile
// step; on a 2-core AVX2 EPYC the 16-row q4_0 GEMM [1536, 576] went from a median 671 to 518 us
// a call, [576, 1536] from 784 to 534 (benchmarks/RESULTS.md, "Session 52"). The 512-bit builds
// keep q_i8_block (their tail after the groups) to LLVM's choice.
#define Q_BLOCK_INLINE (!(Q_G4 || Q_P8))
#if Q_BLOCK_INLINE
__attribute__((always_inline))
#endif
inline void q_i8_block(int kb, int K, int blocks, const __global uchar* QA, const __global float* ad,
                       const __global float* as, const int* row, const __global uchar* const* w,
                       const q_pf* pf, float8 (*acc)[RN], float (*accm)[RN], int fetch) {
  q_act a[RM];
  float da[RM], sa[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    a[i] = q_act_at(QA + (long)row[i] * K, kb, blocks);
    da[i] = ad[(long)row[i] * blocks + kb];
    sa[i] = QTYPE != 0 ? as[(long)row[i] * blocks + kb] : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < RN; ++j) {
    const __global uchar* p = w[j] + (long)kb * QBYTES;
    if (fetch == Q_FETCH_IN) {
      Q_PREFETCH_IN(p, pf[j]);
    } else if (fetch == Q_FETCH_CHECKED) {
      Q_PREFETCH(p, pf[j]);
    }
    const float8 dw = Q_HALF8_AT(p);  // the block's scale in every lane
#if QTYPE == 2
    const float m = q_min(p);
#else
    const float m = dw.s0;
#endif
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      acc[i][j] = fma(dw * da[i], convert_float8(q_dot(p, a[i])), acc[i][j]);
      if (QTYPE != 0) accm[i][j] = fma(m, sa[i], accm[i][j]);
    }
  }
}

// Small tiles (decode: RM = RN = 1) alternate two sets of accumulators over the k blocks, so
// consecutive blocks' multiply-adds do not wait on each other (4-cycle FMA latency against ~18
// instructions a block). Four blocks a step (the same two sets) spilled on AVX2's 16 registers
// and measured no better.
#define Q_ACC2 (RM * RN <= 4)
// Decode's tiles inline the row walks (Q_WALK below, q_i8_walk), and so does every tile of the
// block-by-block walk (Q_BLOCK_INLINE).
#define Q_INLINE_WALK (RM * RN <= 2 || Q_BLOCK_INLINE)

#if Q_G4 || Q_P8
// The 512-bit walks: q4's four blocks a register (Q_G4) and q8_0's two (Q_P8, q8_i8_pairs
// below) share q_madd64 and the target attributes.
// Four q4 blocks of one weight row at once (Q_G4's layout): each block's 16 quantized bytes take
// one 128-bit lane, their low nibbles meet the group's k 0..15 bytes and their high nibbles its
// k 16..31, and the four blocks' scales come in one vcvtph2ps. Per block that is ~7 instructions
// (in 256-bit units) where the one-block loop takes ~14, most of them its scalar scale chain.
// With AVX512-VNNI (Q_VNNI: the config's qx=1 on a host whose CPU has it, kernels/cl_source.cpp's
// PRISM_X86_VNNI) the pair vpmaddubsw + vpmaddwd and the add become one vpdpbusd: the same exact
// sums (a nibble times an int8 of at most 127 in magnitude, four to an int). PoCL compiles for its
// CPU name (skylake-avx512 on a Sapphire Rapids-class VM), which leaves VNNI out, so the row's walk
// is then a function of its own with the feature (Q_TARGET): a caller without it cannot inline it,
// and PoCL's work-group function, into which the kernel is inlined, fails to select its
// instructions. It is not a win everywhere (benchmarks/RESULTS.md, "Issue 17, sessions 40 and 41"):
// at [16384, 4096] it lost 1.6-1.8x for q4_0 and ~1.4x for q4_1 on PoCL 5.0 with 16 cores, and 4-6%
// for q4_0 on a 2-core AVX-512 EPYC (q4_1 gained 12-17% there), so it is a tuned key (qx), off by
// default. In prefill's tiles (rm x qrn rows a work-item, M = 16 on a 2-core AVX-512 EPYC, [3072,
// 576] q4_0) it took 5-22% off a call (median ~9%; benchmarks/RESULTS.md, "Issue 17, session 47").
// Q_WALK marks the walks over a row (q_i8_groups, q8_i8_pairs): with VNNI the function called once
// a work-item's tile of rows; else, in decode's tiles (Q_INLINE_WALK), inlined into the kernel.
// LLVM's own choice left them as calls once the walk grew past its size limit, whose register saves
// and constant reloads, once a row, cost a 576-long row more than its tail blocks did. Prefill's
// tiles do RM x RN rows' work a call, and inlined there their programs took twice as long to build
// on PoCL, so they keep the call.
#if defined(PRISM_X86_VNNI) && PRISM_X86_VNNI
#define Q_VNNI 1
#define Q_TARGET __attribute__((target("avx512vnni")))
#define Q_WALK Q_TARGET
#else
#define Q_VNNI 0
#define Q_TARGET
#if Q_INLINE_WALK
#define Q_WALK __attribute__((always_inline))
#else
#define Q_WALK
#endif
#endif
typedef char q_v64qi __attribute__((vector_size(64)));
typedef short q_v32hi __attribute__((vector_size(64)));
Q_TARGET inline int16 q_madd64(int16 acc, q_v64qi u, q_v64qi s) {
#if Q_VNNI
  return __builtin_ia32_vpdpbusd512(acc, as_int16(u), as_int16(s));
#else
  const q_v32hi p = __builtin_ia32_pmaddubsw512(u, s);
  return acc + as_int16(__builtin_ia32_pmaddwd512(p, (q_v32hi)((int16)0x00010001)));
#endif
}

// A block pair's two scales, each over its block's 8 lanes of a pair's sums (q8_i8_pairs, and
// q_i8_groups' pair after the groups).
inline float16 q_pair_lanes(float2 d) {
  return __builtin_shufflevector(d, d, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
}

#if Q_G4
// Blocks 4g .. 4g + 3 of the weight row at w: their quant bytes a 128-bit lane each (nib), their
// scales (dw) and q4_1's mins (mw; q4_0: dw again). A group is 72 (q4_0) or 80 (q4_1) contiguous
// bytes whose fields all start at even bytes, so AVX512BW's word permutes gather it: one 64-byte
// load and one or two 8-byte ones, the quant bytes to the four lanes by one vpermi2w and the f16
// fields by one vpermw, where a lane-by-lane gather took four 16-byte loads, three inserts and four
// scalar loads a field. With the pair after the groups (q_i8_groups) and the walks inlined
// (Q_WALK), the 135M head's [49152, 576] GEMV on a 2-core AVX-512 EPYC went from 28.0 to 32.0
// GB/s (q4_0) and from 26.6 to 33.5 (q4_1), and that model's Q4_0 decode ran 7-15% faster
// (benchmarks/RESULTS.md, "Issue 17, session 46").
typedef char q_v64qi_u __attribute__((vector_size(64), aligned(1)));
typedef ulong __attribute__((aligned(1))) q_ulong_u;
typedef float q_v8sf __attribute__((vector_size(32)));
Q_TARGET inline void q_w_group(int g, const __global uchar* w, q_pf pf, uint16* nib, float4* dw, float4* mw) {
  const __global uchar* p = w + (long)g * 4 * QBYTES;
  Q_PREFETCH(p, pf);
  // The group's 4 QBYTES bytes: 64 in one load, the rest (8 for q4_0, 16 for q4_1) in another.
  const q_v64qi lo = *(const __global q_v64qi_u*)p;
  const ulong t1 = QBYTES * 4 > 72 ? *(const __global q_ulong_u*)(p + 72) : 0;
  const q_v64qi hi = (q_v64qi)((ulong8)(*(const __global q_ulong_u*)(p + 64), t1, 0, 0, 0, 0, 0, 0));
  // Lane j (bytes 16 j ..) takes block j's quant bytes (index 64 and up: hi's bytes), and words
  // 0 .. 3 (4 .. 7) the blocks' scales (q4_1's mins), fields at whole words of lo.
  q_v32hi bi;
#pragma unroll
  for (int k = 0; k < 32; ++k) bi[k] = (short)(k / 8 * QBYTES / 2 + QOFF / 2 + k % 8);
  q_v32hi wi = (q_v32hi)((int16)0);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    wi[j] = (short)(j * QBYTES / 2);
    wi[4 + j] = (short)(j * QBYTES / 2 + 1);
  }
  *nib = as_uint16(__builtin_ia32_vpermi2varhi512((q_v32hi)lo, bi, (q_v32hi)hi));
  const q_v32hi f16 = __builtin_ia32_permvarhi512((q_v32hi)lo, wi);
  const float8 fields =
      as_float8((q_v8sf)__builtin_ia32_vcvtph2ps256(__builtin_shufflevector(f16, f16, 0, 1, 2, 3, 4, 5, 6, 7)));
  *dw = fields.lo;
  *mw = QTYPE == 1 ? fields.lo : fields.hi;
}

// A weight group (its low and high nibbles, scales dw, mins mw) against an activation group (k
// 0..15 bytes alo, k 16..31 bytes ahi of its four blocks, their scales da and scaled sums sa): the
// products into acc (4 lanes a block), q4_0's d_w * s_a or q4_1's m * s_a into accm.
Q_TARGET inline void q_i8_pair(uint16 nlo, uint16 nhi, float4 dw, float4 mw, q_v64qi alo, q_v64qi ahi, float4 da,
                               float4 sa, float16* acc, float4* accm) {
  const int16 i = q_madd64(q_madd64((int16)0, (q_v64qi)nlo, alo), (q_v64qi)nhi, ahi);
  const float4 d = dw * da;
  *acc = fma(convert_float16(i), __builtin_shufflevector(d, d, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), *acc);
  *accm = fma(mw, sa, *accm);  // q4_0: d_w * s_a (times -8 at the end); q4_1: m * s_a
}

// The whole groups of the kernel's RM activation rows (QA's rows row[i], K long), and two blocks
// after them where a row has them, against its RN weight rows w[j], into acc[i][j] and
// accm[i][j]; returns the blocks walked (the one-block loop takes the rest). Each weight group is
// loaded and split into nibbles once for the RM rows, each activation group once for the RN weight
// rows. Decode
// (RM = RN = 1) is the one-pair case; in prefill's tiles (4 x 4 by default) the one-block loop
// (q_i8_block) spends two 256-bit multiply-adds, a conversion and a multiply-add per block and
// pair, and this one the same per four blocks in 512-bit registers.
Q_WALK inline int q_i8_groups(const __global uchar* const* w, const __global uchar* QA, int K,
                              const __global float* ad, const __global float* as, const int* row,
                              const q_pf* pf, float16 (*acc)[RN], float4 (*accm)[RN]) {
  const int blocks = K / 32, groups = blocks / 4;
  float16 a[RM][RN];
  float4 am[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      a[i][j] = (float16)0.0f;
      am[i][j] = (float4)0.0f;
    }
  const uint16 m = (uint16)0x0F0F0F0Fu;
  for (int g = 0; g < groups; ++g) {
    uint16 nlo[RN], nhi[RN];
    float4 dw[RN], mw[RN];
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      uint16 nib;
      q_w_group(g, w[j], pf[j], &nib, &dw[j], &mw[j]);
      nlo[j] = nib & m;
      nhi[j] = (nib >> 4) & m;
    }
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const __global uint* qa = (const __global uint*)(QA + (long)row[i] * K + g * 128);
      const q_v64qi alo = (q_v64qi)vload16(0, qa), ahi = (q_v64qi)vload16(0, qa + 16);
      const float4 da = vload4(g, ad + (long)row[i] * blocks), sa = vload4(g, as + (long)row[i] * blocks);
#pragma unroll
      for (int j = 0; j < RN; ++j) q_i8_pair(nlo[j], nhi[j], dw[j], mw[j], alo, ahi, da, sa, &a[i][j], &am[i][j]);
    }
  }
  int b = groups * 4;
  if (b + 2 <= blocks) {  // two blocks past the last group (K = 576: 18 blocks), as a pair
    uint16 nib[RN];
    float2 dw[RN], mw[RN];
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      const __global uchar* p = w[j] + (long)b * QBYTES;
      const uint4 q0 = as_uint4(vload16(0, p + QOFF)), q1 = as_uint4(vload16(0, p + QBYTES + QOFF));
      // Lanes: block b's low and high nibbles, then block b + 1's (the activations' block-by-block
      // layout past the groups: each block's k 0..15 bytes, then its k 16..31).
      nib[j] = ((uint16)(q0, q0, q1, q1) >> (uint16)(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4)) & m;
      dw[j] = (float2)(q_scale(p), q_scale(p + QBYTES));
      mw[j] = QTYPE == 2 ? (float2)(q_min(p), q_min(p + QBYTES)) : dw[j];
    }
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const q_v64qi av = (q_v64qi)vload16(0, (const __global uint*)(QA + (long)row[i] * K + b * 32));
      const float2 da = vload2(0, ad + (long)row[i] * blocks + b);
      const float2 sa = vload2(0, as + (long)row[i] * blocks + b);
#pragma unroll
      for (int j = 0; j < RN; ++j) {
        const int16 sum = q_madd64((int16)0, (q_v64qi)nib[j], av);
        const float2 d = dw[j] * da;
        a[i][j] = fma(convert_float16(sum), q_pair_lanes(d), a[i][j]);
        am[i][j] = fma((float4)(mw[j], 0.0f, 0.0f), (float4)(sa, 0.0f, 0.0f), am[i][j]);
      }
    }
    b += 2;
  }
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      acc[i][j] = a[i][j];
      accm[i][j] = am[i][j];
    }
  return b;
}
#endif  // Q_G4

#if Q_P8
// q8_0, two blocks a step (Q_P8): the first `pairs` block pairs of the kernel's RM activation rows
// against its RN weight rows, into acc[i][j] (lanes 0..7 the pair's first block, 8..15 its
// second). Each weight pair's 64 quant bytes are loaded once, as magnitudes |w| and the sign mask
// that moves onto each activation row (vpsignb's trick, which AVX-512 lacks: a xor and a
// subtract), so one vpmaddubsw + vpmaddwd (or vpdpbusd) takes 64 products where the one-block loop
// takes 32; the two scales scale their 8 lanes each.
Q_WALK inline void q8_i8_pairs(int pairs, const __global uchar* const* w, const __global uchar* QA,
                               int K, const __global float* ad, const int* row, const q_pf* pf,
                               float16 (*acc)[RN]) {
  const int blocks = K / 32;
  float16 a[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) a[i][j] = (float16)0.0f;
  for (int g = 0; g < pairs; ++g) {
    q_v64qi wu[RN], wneg[RN];
    float2 dw[RN];
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      const __global uchar* p = w[j] + (long)g * 2 * QBYTES;
      Q_PREFETCH(p, pf[j]);
      const q_v64qi wq = (q_v64qi)(uint16)(as_uint4(vload16(0, p + 2)), as_uint4(vload16(0, p + 18)),
                                           as_uint4(vload16(0, p + QBYTES + 2)),
                                           as_uint4(vload16(0, p + QBYTES + 18)));
      wneg[j] = (q_v64qi)(wq < 0);
      wu[j] = (wq ^ wneg[j]) - wneg[j];
      dw[j] = (float2)(q_scale(p), q_scale(p + QBYTES));
    }
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const q_v64qi av = (q_v64qi)vload16(0, (const __global uint*)(QA + (long)row[i] * K + g * 64));
      const float2 da = vload2(g, ad + (long)row[i] * blocks);
#pragma unroll
      for (int j = 0; j < RN; ++j) {
        const int16 s = q_madd64((int16)0, wu[j], (av ^ wneg[j]) - wneg[j]);
        const float2 d = dw[j] * da;
        a[i][j] = fma(convert_float16(s), q_pair_lanes(d), a[i][j]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = a[i][j];
}
#endif  // Q_P8
#endif

// The kernel's walk: its RM activation rows (row[i]) against the RN weight rows w[j], into v.
#if Q_INLINE_WALK
__attribute__((always_inline))
#endif
inline void q_i8_walk(int K, const __global uchar* QA, const __global float* ad, const __global float* as,
                      const int* row, const __global uchar* const* w, const q_pf* pf, float (*v)[RN]) {
  const int blocks = K / 32;
  float8 acc[RM][RN], acc2[RM][RN];
  float accm[RM][RN], accm2[RM][RN];
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      acc[i][j] = acc2[i][j] = (float8)0.0f;
      accm[i][j] = accm2[i][j] = 0.0f;
    }
  int kb = 0;
#if Q_P8
  float16 acc16[RM][RN];
  q8_i8_pairs(blocks / 2, w, QA, K, ad, row, pf, acc16);
  kb = blocks / 2 * 2;
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = acc16[i][j].lo + acc16[i][j].hi;
#endif
#if Q_G4
  float16 acc16[RM][RN];
  float4 accm4[RM][RN];
  kb = q_i8_groups(w, QA, K, ad, as, row, pf, acc16, accm4);  // the groups, and a pair after them
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      acc[i][j] = acc16[i][j].lo + acc16[i][j].hi;
      accm[i][j] = prism_hsum4(accm4[i][j]);
    }
#endif
  if (Q_ACC2) {
    // Rows whose end plus the prefetch distance lies within the group's rows (all but a group's
    // last few) ask for their lines unchecked: a straight-line step, 5 instructions fewer a pair.
    // The loop is written twice, each with a constant `fetch`: one loop over a variable `fetch`
    // (inside ? IN : CHECKED) kept both tests in the step, as PoCL 3.1's LLVM does not unswitch it.
    bool inside = true;
#pragma unroll
    for (int j = 0; j < RN; ++j)
      inside = inside && w[j] + (long)blocks * QBYTES + pf[j].dist < pf[j].end;
    if (inside) {
      for (; kb + 1 < blocks; kb += 2) {
        q_i8_block(kb, K, blocks, QA, ad, as, row, w, pf, acc, accm, Q_FETCH_IN);
        q_i8_block(kb + 1, K, blocks, QA, ad, as, row, w, pf, acc2, accm2,
                   QTYPE == 0 ? Q_FETCH_IN : Q_FETCH_NONE);
      }
    } else {
      for (; kb + 1 < blocks; kb += 2) {
        q_i8_block(kb, K, blocks, QA, ad, as, row, w, pf, acc, accm, Q_FETCH_CHECKED);
        q_i8_block(kb + 1, K, blocks, QA, ad, as, row, w, pf, acc2, accm2,
                   QTYPE == 0 ? Q_FETCH_CHECKED : Q_FETCH_NONE);
      }
    }
  }
  for (; kb < blocks; ++kb)
    q_i8_block(kb, K, blocks, QA, ad, as, row, w, pf, acc, accm, Q_FETCH_CHECKED);
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < RN; ++j) {
      v[i][j] = prism_hsum8(acc[i][j] + acc2[i][j]);
      const float vm = accm[i][j] + accm2[i][j];
#if QTYPE == 1
      v[i][j] -= 8.0f * vm;
#elif QTYPE == 2
      v[i][j] += vm;
#endif
    }
}

#ifdef QA_FUSED
// qa=2's arguments: the float activations in the workspace's place, and after the bias's the
// norm's (QNORM), the workspace and its three counters.
__kernel Q_CPU_GROUP void gemm_q_cpu_i8(int M, int N, int K, float alpha, float beta, __global const GT* A, long a_off,
                            int sam, __global const uchar* W, long w_off, long swn, __global GT* C, long c_off,
                            int scm, __global const GT* X, long x_off, int sxm, int sxn,
#ifdef QNORM
                            __global const GT* G, long g_off, float eps,
#endif
                            __global uchar* QA, __global int* flags) {
  if (get_local_id(0) == 0 && get_local_id(1) == 0) {
    volatile __global int* vf = (volatile __global int*)flags;
    if (vf[1] == 0) {
      if (atomic_cmpxchg(&flags[0], 0, 1) == 0) {
#ifdef QNORM
        q_quantize_rows(M, K, A, a_off, sam, QA, G + g_off, eps);
#else
        q_quantize_rows(M, K, A, a_off, sam, QA);
#endif
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        atomic_xchg(&flags[1], 1);
      } else {
        while (vf[1] == 0) {
        }
      }
    }
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    if (atomic_inc(&flags[2]) == (int)(get_num_groups(0) * get_num_groups(1)) - 1) {
      atomic_xchg(&flags[0], 0);
      atomic_xchg(&flags[1], 0);
      atomic_xchg(&flags[2], 0);
    }
  }
  barrier(CLK_GLOBAL_MEM_FENCE);
#else
__kernel Q_CPU_GROUP void gemm_q_cpu_i8(int M, int N, int K, float alpha, float beta, __global const uchar* QA,
                            __global const uchar* W, long w_off, long swn, __global GT* C, long c_off, int scm,
                            __global const GT* X, long x_off, int sxm, int sxn) {
#endif
  const int NO = Q_COLS(N), n0 = Q_N0;
  const int m0 = get_global_id(1) * RM;
  if (n0 >= NO || m0 >= M) return;
  const int blocks = K / 32;
  const __global float* ad = (const __global float*)(QA + (long)M * K);
  const __global float* as = ad + (long)M * blocks;
  int row[RM];
  const __global uchar* w[Q_ROWS];
  q_pf pf[Q_ROWS];
#pragma unroll
  for (int i = 0; i < RM; ++i) row[i] = min(m0 + i, M - 1);
#ifdef Q_GATED
  // The group's gate rows, then the same rows' up halves NO rows on.
  const q_pf gate_pf = q_rows_pf(W, w_off, swn, NO, RN);
  q_pf up_pf = gate_pf;
  up_pf.end += (long)NO * swn * QBYTES;
#pragma unroll
  for (int j = 0; j < RN; ++j) {
    w[j] = W + (w_off + (long)min(n0 + j, NO - 1) * swn) * QBYTES;
    w[RN + j] = w[j] + (long)NO * swn * QBYTES;
    pf[j] = gate_pf;
    pf[RN + j] = up_pf;
  }
#else
  const q_pf rows_pf = q_rows_pf(W, w_off, swn, N, RN);
#pragma unroll
  for (int j = 0; j < RN; ++j) {
    w[j] = W + (w_off + (long)min(n0 + j, N - 1) * swn) * QBYTES;
    pf[j] = rows_pf;
  }
#endif
  float v[RM][RN], u[RM][RN];
  q_i8_walk(K, QA, ad, as, row, &w[0], &pf[0], v);
#ifdef Q_GATED
  q_i8_walk(K, QA, ad, as, row, &w[RN], &pf[RN], u);
#endif
  q_store(v, u, M, N, NO, m0, n0, alpha, beta, C, c_off, scm, X, x_off, sxm, sxn);
}
#endif  // RM
#endif  // QA8

#ifdef WG
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void gemm_q_gemv(
    int M, int N, int K, float alpha, float beta, __global const GT* A, long a_off, int sam,
    __global const uchar* W, long w_off, long swn, __global GT* C, long c_off, int scm, __global const GT* X,
    long x_off, int sxm, int sxn) {
  __local float red[MB * NB][WG];
  const int t = get_local_id(0);
  const int n0 = get_group_id(0) * NB;
  const int m0 = get_group_id(1) * MB;
  const int rows = min(MB, M - m0);
  const int blocks = K / 32;
  float acc[MB][NB];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[i][j] = 0.0f;
  for (int kb = t; kb < blocks; kb += WG) {
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const __global uchar* p = W + (w_off + (long)min(n0 + j, N - 1) * swn + kb) * QBYTES;
      float16 lo, hi;
      q_values(p, &lo, &hi);
      const float d = q_scale(p);
#if QTYPE == 2
      const float m = q_min(p);
#endif
#pragma unroll
      for (int i = 0; i < MB; ++i) {
        if (i < rows) {
          const __global GT* a = A + a_off + (long)(m0 + i) * sam + kb * 32;
          const float16 alo = PRISM_LOADV(a), ahi = PRISM_LOADV(a + 16);
          float s = d * prism_hsum16(fma(alo, lo, ahi * hi));
#if QTYPE == 2
          s = fma(m, prism_hsum16(alo + ahi), s);
#endif
          acc[i][j] += s;
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) red[i * NB + j][t] = acc[i][j];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = WG / 2; s > 0; s >>= 1) {
    if (t < s) {
#pragma unroll
      for (int r = 0; r < MB * NB; ++r) red[r][t] += red[r][t + s];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = t; r < MB * NB; r += WG) {
    const int i = r / NB, j = r % NB, n = n0 + j;
    if (i < rows && n < N)
      PRISM_STORE(C + c_off + (long)(m0 + i) * scm + n,
                  prism_epilogue(red[r][0], alpha, beta, X, x_off, sxm, sxn, m0 + i, n));
  }
}
#endif

#ifdef WARPS
#define LANES 32
// A team's per-lane partial sums acc -> one local-memory tree per (row, column) -> the epilogue
// and the stores, spread over the team's lanes. Every item of the group calls it (barriers).
// With QNORM_F (rms_norm_linear on float activations) the rows' per-lane sums of squares `ss`
// are reduced alongside (rows MB * NB .. + MB of red), and each sum is scaled by its row's
// rsqrt(mean square + eps) before the epilogue.
// The norm's operands after a float-activation rows kernel's own (gemm_q_rows with QNORM_F,
// gemm_q_blocks_i8 with QL_NORM): its weight G, G's offset, eps. A build without them has eps 0.
#if QNORM_F || QL_NORM
#define Q_NORM_PARAMS , __global const GT *G, long g_off, float eps
#define Q_NO_NORM_EPS
#else
#define Q_NORM_PARAMS
#define Q_NO_NORM_EPS const float eps = 0.0f;
#endif
#if QNORM_F
#define QROWS_RED (MB * NB + MB)
#else
#define QROWS_RED (MB * NB)
#endif
void q_rows_finish(__local float (*red)[LANES * WARPS], float (*acc)[NB], const float* ss, int K, float eps, int t,
                   int n0, int m0, int rows, int M, int N, float alpha, float beta, __global GT* C, long c_off,
                   int scm, __global const GT* X, long x_off, int sxm, int sxn) {
  const int lane = t % LANES, team = t / LANES;
#pragma unroll
  for (int i = 0; i < MB; ++i) {
#pragma unroll
    for (int j = 0; j < NB; ++j) red[i * NB + j][t] = acc[i][j];
#if QNORM_F
    red[MB * NB + i][t] = ss[i];
#endif
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = LANES / 2; h > 0; h >>= 1) {
    if (lane < h) {
#pragma unroll
      for (int r = 0; r < QROWS_RED; ++r) red[r][t] += red[r][t + h];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int r = lane; r < MB * NB; r += LANES) {
    const int i = r / NB, j = r % NB, n = n0 + j;
#if QNORM_F
    const float scale = rsqrt(red[MB * NB + i][team * LANES] / (float)K + eps);
#else
    const float scale = 1.0f;
#endif
    if (i < rows && n < N)
      PRISM_STORE(C + c_off + (long)(m0 + i) * scm + n,
                  prism_epilogue(red[r][team * LANES] * scale, alpha, beta, X, x_off, sxm, sxn, m0 + i, n));
  }
}

#if LANE_SHFL
#include "lane_shfl.cl"  // lane_xor
// q_rows_finish for one activation row (MB = 1, no QNORM_F) on NVIDIA: each row's 32 lane sums
// meet by shfl.sync butterflies (the tree's pairing, so the same sum bit for bit), and lane j
// stores row j. No barrier: a team's epilogue does not wait for the group's other teams.
void q_rows_finish_shfl(float (*acc)[NB], int lane, int n0, int m0, int N, float alpha, float beta,
                        __global GT* C, long c_off, int scm, __global const GT* X, long x_off, int sxm,
                        int sxn) {
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    float v = acc[0][j];
#pragma unroll
    for (int o = LANES / 2; o > 0; o >>= 1) v += lane_xor(v, o);
    if (lane == j && n0 + j < N)
      PRISM_STORE(C + c_off + (long)m0 * scm + n0 + j,
                  prism_epilogue(v, alpha, beta, X, x_off, sxm, sxn, m0, n0 + j));
  }
}
#endif

// With QA8 (qa=1) the same walk reads quantize_rows_q8's workspace QA in A's place: a lane's 4
// weight bytes meet 4 (q8_0) or 8 (q4: low and high nibbles) int8 activations in one or two
// integer dot products, scaled once by d_w * d_a, so the activation traffic per weight byte
// drops 4x (f32) or 2x (16-bit); q4_0's -8 and q4_1's min take the lane's activation sum (a dot
// product with ones). The weights stay as packed bytes (uint) there, as floats otherwise.
#ifdef QA8
#define Q_W4 uint
#else
#define Q_W4 float4
#endif
__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void gemm_q_rows(
    int M, int N, int K, float alpha, float beta,
#ifdef QA8
    __global const uchar* QA,
#else
    __global const GT* A, long a_off, int sam,
#endif
    __global const uchar* W, long w_off, long swn, __global GT* C, long c_off, int scm, __global const GT* X,
    long x_off, int sxm, int sxn Q_NORM_PARAMS) {
  __local float red[QROWS_RED][LANES * WARPS];
  const int t = get_local_id(0), lane = t % LANES, team = t / LANES;
  const int n0 = (get_group_id(0) * WARPS + team) * NB;
  const int m0 = get_group_id(1) * MB;
  const int rows = min(MB, M - m0);
  // Slot s = lane + LANES * it is slot q = s % SPB of block s / SPB: q is the lane's for good
  // (SPB divides LANES) and the block advances by KSTEP, so the loop only moves pointers.
  const int blocks = K / 32, q = lane % SPB;
  const int KSTEP = LANES / SPB;
  int kb = lane / SPB;
  const __global uchar* wp[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) wp[j] = W + (w_off + (long)min(n0 + j, N - 1) * swn + kb) * QBYTES;
#ifdef QA8
  const __global float* ad = (const __global float*)(QA + (long)M * K);
  const __global uchar* ap[MB];
  const __global float* dp[MB];
#pragma unroll
  for (int i = 0; i < MB; ++i) {
    const long m = m0 + min(i, rows - 1);
    ap[i] = QA + m * K + kb * 32 + 4 * q;
    dp[i] = ad + m * blocks + kb;
  }
#else
  const __global GT* ap[MB];
#pragma unroll
  for (int i = 0; i < MB; ++i) ap[i] = A + a_off + (long)(m0 + min(i, rows - 1)) * sam + kb * 32 + 4 * q;
#endif
#if QNORM_F
  const __global GT* gp = G + g_off + kb * 32 + 4 * q;  // the norm weight at the lane's k
#endif
  Q_NO_NORM_EPS
  float acc[MB][NB], ss[MB];
#pragma unroll
  for (int i = 0; i < MB; ++i) {
    ss[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[i][j] = 0.0f;
  }
#pragma unroll 2
  for (; kb < blocks; kb += KSTEP) {
    Q_W4 wl[NB];
#if QTYPE != 0
    Q_W4 wh[NB];
#endif
    float d[NB];
#if QTYPE == 2
    float mn[NB];
#endif
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const uint v = q_slot(wp[j], 0, q);
      d[j] = vload_half(0, (const __global half*)wp[j]);
#if defined(QA8) && QTYPE == 0
      wl[j] = v;
#elif defined(QA8)
      wl[j] = v & 0x0F0F0F0Fu;  // nibbles 0..15: non-negative as signed bytes
      wh[j] = (v >> 4) & 0x0F0F0F0Fu;
#elif QTYPE == 0
      float4 unused;
      q_slot_floats(v, &wl[j], &unused);
#else
      q_slot_floats(v, &wl[j], &wh[j]);
#endif
#if QTYPE == 2
      mn[j] = vload_half(1, (const __global half*)wp[j]);
#endif
      wp[j] += KSTEP * QBYTES;
    }
#pragma unroll
    for (int i = 0; i < MB; ++i) {
#ifdef QA8
      const uint al = *(const __global uint*)ap[i];
#if QTYPE != 0
      const uint ah = *(const __global uint*)(ap[i] + 16);
      const int asum = q_dp4a(ah, 0x01010101u, q_dp4a(al, 0x01010101u, 0));
#endif
      const float da = *dp[i];
      dp[i] += KSTEP;
#else
      float4 al = q_act4(ap[i], 0);
#if QTYPE != 0
      float4 ah = q_act4(ap[i], 16);
#endif
#if QNORM_F
      ss[i] = fma(al.s0, al.s0, fma(al.s1, al.s1, fma(al.s2, al.s2, fma(al.s3, al.s3, ss[i]))));
      al *= q_act4(gp, 0);
#if QTYPE != 0
      ss[i] = fma(ah.s0, ah.s0, fma(ah.s1, ah.s1, fma(ah.s2, ah.s2, fma(ah.s3, ah.s3, ss[i]))));
      ah *= q_act4(gp, 16);
#endif
#endif
#endif
      ap[i] += KSTEP * 32;
#pragma unroll
      for (int j = 0; j < NB; ++j) {
#if defined(QA8) && QTYPE == 0
        acc[i][j] = fma(d[j] * da, (float)q_dp4a(wl[j], al, 0), acc[i][j]);
#elif defined(QA8) && QTYPE == 1
        acc[i][j] = fma(d[j] * da, (float)(q_dp4a(wh[j], ah, q_dp4a(wl[j], al, 0)) - 8 * asum), acc[i][j]);
#elif defined(QA8)
        acc[i][j] =
            fma(da, fma(d[j], (float)q_dp4a(wh[j], ah, q_dp4a(wl[j], al, 0)), mn[j] * (float)asum), acc[i][j]);
#elif QTYPE == 0
        acc[i][j] = fma(d[j], dot(al, wl[j]), acc[i][j]);
#else
        acc[i][j] = fma(d[j], dot(al, wl[j]) + dot(ah, wh[j]), acc[i][j]);
#if QTYPE == 2
        acc[i][j] = fma(mn[j], dot(al + ah, (float4)1.0f), acc[i][j]);
#endif
#endif
      }
    }
#if QNORM_F
    gp += KSTEP * 32;
#endif
  }
  q_rows_finish(red, acc, ss, K, eps, t, n0, m0, rows, M, N, alpha, beta, C, c_off, scm, X, x_off, sxm, sxn);
}

#ifdef QA8
// The int8 walks' signature and prologue (gemm_q_pairs_i8, gemm_q_blocks_i8): the team's weight
// rows from n0, its activation rows from m0, and the workspace's d_a (ad) and s_a (as) planes
// after its M x K int8 activations.
#define Q_I8_KERNEL(name)                                                                             \
  __kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void name(                      \
      int M, int N, int K, float alpha, float beta, __global const uchar* QA, __global const uchar* W, \
      long w_off, long swn, __global GT* C, long c_off, int scm, __global const GT* X, long x_off,      \
      int sxm, int sxn)
#define Q_I8_PROLOGUE                                                      \
  __local float red[MB * NB][LANES * WARPS];                               \
  const int t = get_local_id(0), lane = t % LANES, team = t / LANES;       \
  const int n0 = (get_group_id(0) * WARPS + team) * NB;                    \
  const int m0 = get_group_id(1) * MB;                                     \
  const int rows = min(MB, M - m0);                                        \
  const __global float* ad = (const __global float*)(QA + (long)M * K);    \
  const __global float* as = ad + (long)M * (K / 32);
#if QPAIR == 1
// gemm_q_rows on int8 activations with 32-bit weight loads (qp=1): lane l of a team takes block pairs l, l + 32, ...
// of each of its NB rows. A pair of q8_0/q4_0 blocks (68 / 36 bytes) starts 4-byte aligned where
// a single block does not (the host asks K % 64 == 0 and an even block offset), so a lane reads
// its pair in PW word loads instead of 16-bit pieces. The activation block comes as two uint4
// (32 int8), its d_a and s_a = d_a * sum(q_a) from the workspace; q4_0's -8 then costs one
// multiply-add per block: d_w * (d_a * dot - 8 * s_a), and q4_1's min d_w * dot * d_a + m * s_a.
// PW, q_half_bits, q_words_at and q_block_dot: quant_common.cl (shared with gemv_chain.cl).
Q_I8_KERNEL(gemm_q_pairs_i8) {
  Q_I8_PROLOGUE
  const int pairs = K / 64;
  const __global uint* wp[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j)
    wp[j] = (const __global uint*)(W + (w_off + (long)min(n0 + j, N - 1) * swn) * QBYTES) + lane * PW;
  float acc[MB][NB];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[i][j] = 0.0f;
  for (int pr = lane; pr < pairs; pr += LANES) {
    uint w[NB][PW + 1];
#pragma unroll
    for (int j = 0; j < NB; ++j) {
#pragma unroll
      for (int u = 0; u < PW; ++u) w[j][u] = wp[j][u];
      w[j][PW] = 0;
      wp[j] += LANES * PW;
    }
#pragma unroll
    for (int hb = 0; hb < 2; ++hb) {  // the pair's two blocks
      const int kb = 2 * pr + hb;
#pragma unroll
      for (int i = 0; i < MB; ++i) {
        const long m = m0 + min(i, rows - 1);
        const __global uint4* a = (const __global uint4*)(QA + m * K + (long)kb * 32);
        const uint4 a0 = a[0], a1 = a[1];
        const float da = ad[m * (K / 32) + kb], sa = as[m * (K / 32) + kb];
#pragma unroll
        for (int j = 0; j < NB; ++j) acc[i][j] = q_pair_block(w[j], hb, a0, a1, da, sa, acc[i][j]);
      }
    }
  }
  const float ss[MB] = {0.0f};
  q_rows_finish(red, acc, ss, K, 0.0f, t, n0, m0, rows, M, N, alpha, beta, C, c_off, scm, X, x_off, sxm, sxn);
}
#elif QPAIR == 2
// gemm_q_rows on int8 activations, a lane per block (qp=2): lane l of a team takes whole blocks l,
// l + 32, ... of each of its NB rows, QB_UNROLL of them a step with all their loads issued before
// the step's dot products. A block's bytes come as quant_common.cl's slots (16-bit loads for q8_0
// and q4_0, 2-byte aligned; 32-bit ones for q4_1), or on GPUs for q8_0 as 32-bit words (QW32,
// below), so a block has one scale load and one d_a, s_a pair per lane instead of one per 4-byte
// slot. benchmarks/gpu/quant_layout_probe measured this walk at 0.81-0.86x of a plain 16-byte read
// of the same bytes on the H200 (q4_0, M = 1, [4096..32768] x [4096..11008]), the float walk at
// 0.36-0.39x (benchmarks/RESULTS.md, "Issue 17 and 13, session 27"). In decode it carries the
// nvidia route's q8_0 qkv projections (rms_norm_linear, K >= 4096).
#ifndef QB_UNROLL
#define QB_UNROLL 2
#endif
// Quant words s0 .. s0 + 3 of the block at p (quant_common.cl's 4-byte slots: 16-bit loads for
// q8_0 / q4_0, 32-bit ones for q4_1).
inline uint4 q_slots4(const __global uchar* p, int s0) {
  return (uint4)(q_slot(p, 0, s0), q_slot(p, 0, s0 + 1), q_slot(p, 0, s0 + 2), q_slot(p, 0, s0 + 3));
}
// QW32 (GPUs; q8_0 only): a q8_0 block's 34 bytes in 32-bit loads. A block starts 0 or 2 bytes
// past a 4-byte boundary; the eight words from that boundary hold the scale and quant words 0-6
// (each the word itself or a funnel shift of two), and two 16-bit loads at the block's end give
// quant word 7. No load reads past the block's end, the first word's 2 bytes before it (when it
// starts 2 past a boundary) lie in the same 4-byte-aligned buffer, and no lane diverges: 10
// loads a block for q_slots4's 17. H200 (qp=3, bf16 activations, weights streamed past the L2,
// device time): [16384, 4096] 29.4 -> 26.0 us (0.80 -> 0.92 of the read), [12288, 4096] 24.4 ->
// 23.5, [22016, 4096] 37.4 -> 36.4, [4096, 11008] 24.3 -> 22.0 (0.65 -> 0.72). The same form for
// q4_0 (its 18 bytes in 5 words for 9 halves) was level or slower (26.0 -> 27.8 us at [22016,
// 4096]), so q4 keeps its 16-bit loads (benchmarks/RESULTS.md, "Issue 17, session 47").
// -DQW32=0 / 1 picks either form for q8_0.
#ifndef QW32
#define QW32 (!PRISM_CPU)
#endif
#define Q8_W32 (QW32 && QTYPE == 0)
#if Q8_W32
inline uint q_w32_funnel(uint lo, uint hi, uint sh) { return (uint)((((ulong)hi << 32) | lo) >> sh); }
inline float q8_block_w32(const __global uchar* blk, uint4* q0, uint4* q1) {
  const uint off = (uint)((ulong)blk & 3u), sh = off ? 32u : 16u;
  const __global uint* w = (const __global uint*)(blk - off);
  uint v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = w[i];
  *q0 = (uint4)(q_w32_funnel(v[0], v[1], sh), q_w32_funnel(v[1], v[2], sh), q_w32_funnel(v[2], v[3], sh),
                q_w32_funnel(v[3], v[4], sh));
  *q1 = (uint4)(q_w32_funnel(v[4], v[5], sh), q_w32_funnel(v[5], v[6], sh), q_w32_funnel(v[6], v[7], sh),
                q_slot(blk, 0, 7));  // quant word 7: the 16-bit slot form
  return q_half_bits(v[0] >> (off * 8u));
}
#endif
#ifdef QL_K
// qp=3 (QL_K = K): the same walk with no quantize launch before it. The group first quantizes its
// activation row (MB = 1) into local memory, an item a block through q8_quantize_block (with
// QL_NORM, rms_norm_linear: the row times the norm weight G, the row's sum of squares summed over
// the group), then walks the blocks from there and scales each sum by rsqrt(mean square + eps)
// before the epilogue. Every group repeats the row's quantization (K values from L2), which pays
// where the quantize launch it replaces costs more: quant_layout_probe on the H200 (q4_0, M = 1),
// back to back, 12.1 us against 13.3 for the launch and the GEMV at [12288, 4096], 7.5 against 11.0
// at [4096, 4096], but 26.1 against 24.6 at [22016, 4096], whose 688 groups repeat it the most
// (benchmarks/RESULTS.md, "Issue 17, session 29"). On NVIDIA (LANE_SHFL) its epilogue is
// q_rows_finish_shfl: 1-3% off the GEMV's device time at the 7B shapes (session 45).
#if MB != 1
#error "qp=3 (QL_K) quantizes one activation row a group: MB = 1"
#endif
#ifndef QL_NORM
#define QL_NORM 0
#endif
__kernel __attribute__((reqd_work_group_size(LANES * WARPS, 1, 1))) void gemm_q_blocks_i8(
    int M, int N, int K, float alpha, float beta, __global const GT* A, long a_off, int sam,
    __global const uchar* W, long w_off, long swn, __global GT* C, long c_off, int scm, __global const GT* X,
    long x_off, int sxm, int sxn Q_NORM_PARAMS) {
#if !LANE_SHFL || QL_NORM
  __local float red[NB][LANES * WARPS];
#endif
  __local uint4 lq[QL_K / 16];
  __local float ld[QL_K / 32], ls[QL_K / 32];
  const int t = get_local_id(0), lane = t % LANES, team = t / LANES;
  const int n0 = (get_group_id(0) * WARPS + team) * NB;
  const int m0 = get_group_id(1), rows = 1;
  const __global GT* a = A + a_off + (long)m0 * sam;
#if QL_NORM
  const __global GT* g = G + g_off;
#else
  const __global GT* g = 0;
#endif
  Q_NO_NORM_EPS
  float ssq = 0.0f;
  for (int b = t; b < QL_K / 32; b += LANES * WARPS) {
    uint qw[8];
    float dq, sq;
    ssq += q8_quantize_block(b, a, g, qw, &dq, &sq);
    lq[2 * b] = (uint4)(qw[0], qw[1], qw[2], qw[3]);
    lq[2 * b + 1] = (uint4)(qw[4], qw[5], qw[6], qw[7]);
    ld[b] = dq;
    ls[b] = sq;
  }
#if QL_NORM
  // The row's sum of squares: a tree over the group in red[0] (its barriers order lq too).
  red[0][t] = ssq;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int h = LANES * WARPS / 2; h > 0; h >>= 1) {
    if (t < h) red[0][t] += red[0][t + h];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float rs = rsqrt(red[0][0] / (float)K + eps);
#else
  const float rs = 1.0f;
  (void)ssq;
  (void)eps;
#endif
  barrier(CLK_LOCAL_MEM_FENCE);  // lq complete; red is the epilogue's again (the tree form's)
#else
Q_I8_KERNEL(gemm_q_blocks_i8) {
  Q_I8_PROLOGUE
#endif
  const int blocks = K / 32;
  const __global uchar* wr[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) wr[j] = W + (w_off + (long)min(n0 + j, N - 1) * swn) * QBYTES;
  float acc[MB][NB];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int j = 0; j < NB; ++j) acc[i][j] = 0.0f;
  for (int b0 = lane; b0 < blocks; b0 += LANES * QB_UNROLL) {
    uint4 q0[QB_UNROLL][NB], q1[QB_UNROLL][NB];  // q1: q8_0's second 16 bytes
    float dw[QB_UNROLL][NB], mw[QB_UNROLL][NB];    // mw: q4_1's min
#pragma unroll
    for (int u = 0; u < QB_UNROLL; ++u) {
      const int b = min(b0 + u * LANES, blocks - 1);
      const bool in = b0 + u * LANES < blocks;  // a step past the row's end reads its last block, scaled by 0
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        const __global uchar* blk = wr[j] + (long)b * QBYTES;
#if Q8_W32
        const float d = q8_block_w32(blk, &q0[u][j], &q1[u][j]);
        dw[u][j] = in ? d : 0.0f;
        mw[u][j] = 0.0f;
#else
        dw[u][j] = in ? q_scale(blk) : 0.0f;
        mw[u][j] = in && QTYPE == 2 ? q_min(blk) : 0.0f;
        q0[u][j] = q_slots4(blk, 0);
        q1[u][j] = QTYPE == 0 ? q_slots4(blk, 4) : q0[u][j];
#endif
      }
    }
#pragma unroll
    for (int u = 0; u < QB_UNROLL; ++u) {
      const int b = min(b0 + u * LANES, blocks - 1);
#pragma unroll
      for (int i = 0; i < MB; ++i) {
#ifdef QL_K
        const uint4 a0 = lq[2 * b], a1 = lq[2 * b + 1];
        const float da = ld[b], sa = ls[b];
#else
        const long m = m0 + min(i, rows - 1);
        const __global uint4* a = (const __global uint4*)(QA + m * K + (long)b * 32);
        const uint4 a0 = a[0], a1 = a[1];
        const float da = ad[m * blocks + b], sa = as[m * blocks + b];
#endif
#pragma unroll
        for (int j = 0; j < NB; ++j)
          acc[i][j] = q_block_i8(dw[u][j], mw[u][j], q0[u][j], q1[u][j], a0, a1, da, sa, acc[i][j]);
      }
    }
  }
#ifdef QL_K
#pragma unroll
  for (int j = 0; j < NB; ++j) acc[0][j] *= rs;
#endif
#if defined(QL_K) && LANE_SHFL
  q_rows_finish_shfl(acc, lane, n0, m0, N, alpha, beta, C, c_off, scm, X, x_off, sxm, sxn);
#else
  const float ss[MB] = {0.0f};
  q_rows_finish(red, acc, ss, K, 0.0f, t, n0, m0, rows, M, N, alpha, beta, C, c_off, scm, X, x_off, sxm, sxn);
#endif
}
#endif  // QPAIR
#endif  // QA8
#endif

#ifdef QMMA
// gemm_q_mma (NVIDIA sm_80+, config qmma=1; decode and small M): the weights' GEMV on the tensor
// cores. A work-group owns 16 weight rows and up to 8 activation rows; its QM_WARPS warps split K in
// chunks of 8 blocks (256 k), warp w taking chunks w, w + QM_WARPS, ... Each chunk of the 16 rows
// (16 x 8 x QBYTES contiguous bytes per row, so 16-byte aligned: the host asks K % 256 == 0 and a
// row stride and offset that are multiples of 8 blocks) is read by the warp in coalesced 16-byte
// loads into a local staging area, the next chunk's loads issued before this one's arithmetic.
// From there each lane takes, per block and weight row g and g + 8, the 4 quantized bytes 4c..4c+3
// (c = lane % 4): q4's low nibbles are k 4c..4c+3 and the high ones k 16+4c..; q8_0 takes bytes
// 4c.. and 16+4c... Nibbles become exact 16-bit floats with one mask-or (2^7 + q in bf16, 2^10 + q
// in f16) and one packed fma that removes the offset (q4_0's 8 too), so an m16n8k16 mma per 16 k
// multiplies them with the activations (mma rows: weight rows, mma columns: activation rows).
// The k order inside an mma is free as long as both operands share it: mma k 2c, 2c+1, 2c+8, 2c+9
// carry k 4c, 4c+2, 4c+1, 4c+3 (+16 for the second half), which is what one mask-or of a 32-bit
// word and of it shifted by 8 give. The products are exact (small integers times 16-bit
// activations, f32 sums); the block's f16 scale then multiplies the block's f32 result, and
// q4_1's min takes the activations' block sums from one more mma against a ones matrix. q8_0's
// signed bytes go in as two exact parts, 16 * (high nibble - 8) and the low nibble. f32
// activations (PRISM_DTYPE 0) are split into three bf16 terms whose sum is the f32 value, one mma
// each (QM_TERMS 3). A local-memory sum over the warps, then the epilogue.
#include "mma_common.cl"  // mma_tile_f16, mma_tile_bf16
#if QTYPE == 2
#define QOFF_MMA 4  // q4_1: quantized bytes after the f16 scale and min
#else
#define QOFF_MMA 2
#endif
#define QM_CB 8                               // blocks per chunk
#define QM_RS (QBYTES * QM_CB)                // staged row bytes: 144 (q4_0), 160 (q4_1), 272 (q8_0)
#define QM_SEGS (QM_RS / 16)                  // 16-byte loads per staged row
#define QM_LOADS ((16 * QM_SEGS + 31) / 32)   // per lane per chunk
#if PRISM_DTYPE == 1
#define QM_MAGIC 0x64006400u  // f16 pair 1024 + q
#define QM_ONE 0x3C003C00u
#define QM_NEG8 0xE408E408u   // -(1024 + 8)
#define QM_NEG0 0xE400E400u   // -1024
#define QM_SIXTEEN 0x4C004C00u
#define QM_NEG8X16 0xF408F408u  // -16 * 1032
#define QM_FMA "fma.rn.f16x2"
#define qm_mma mma_tile_f16
#else
#define QM_MAGIC 0x43004300u  // bf16 pair 128 + q
#define QM_ONE 0x3F803F80u
#define QM_NEG8 0xC308C308u   // -(128 + 8)
#define QM_NEG0 0xC300C300u   // -128
#define QM_SIXTEEN 0x41804180u
#define QM_NEG8X16 0xC508C508u  // -16 * 136
#define QM_FMA "fma.rn.bf16x2"
#define qm_mma mma_tile_bf16  // f32 activations too, as three bf16 terms
#endif
#if PRISM_DTYPE == 0
#define QM_TERMS 3
#else
#define QM_TERMS 1
#endif

inline uint qm_fma2(uint a, uint b, uint c) {
  uint d;
  asm volatile(QM_FMA " %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

inline void qm_warp_sync(void) { asm volatile("bar.warp.sync -1;" ::: "memory"); }

// The 32-bit word at local byte offset o (2-byte aligned; a constant after unrolling).
inline uint qm_word(const __local uchar* s, int o) {
  if (o % 4 == 0) return *(const __local uint*)(s + o);
  const __local ushort* h = (const __local ushort*)(s + o);
  return (uint)h[0] | ((uint)h[1] << 16);
}

inline float qm_half(const __local uchar* s, int o) {
  return vload_half(0, (const __local half*)(s + o));
}

// Packed 16-bit pairs of the nibbles at bits 0 and 16 of x, less `neg`: (x & 0xF) - offset.
inline uint qm_nib(uint x, uint neg) { return qm_fma2((x & 0x000F000Fu) | QM_MAGIC, QM_ONE, neg); }

// B fragments of one 16-k half: (k 4c, 4c+2) and (k 4c+1, 4c+3) of activation row `m` from a,
// as QM_TERMS pairs of 16-bit words (f32 activations: three bf16 terms summing to the value).
inline void qm_act(const __global GT* a, bool live, uint* b0, uint* b1) {
#if PRISM_DTYPE == 0
  const float4 x = live ? vload4(0, a) : (float4)0.0f;
  float r[4] = {x.s0, x.s1, x.s2, x.s3};
#pragma unroll
  for (int t = 0; t < QM_TERMS; ++t) {
    uint h[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {  // round to nearest even bf16, keep the rest for the next term
      h[e] = prism_to_bf16(r[e]);
      r[e] -= as_float(h[e] << 16);
    }
    b0[t] = h[0] | (h[2] << 16);
    b1[t] = h[1] | (h[3] << 16);
  }
#else
  uint2 u = (uint2)(0u, 0u);
  if (live) {
#if A_VEC4
    u = *(const __global uint2*)a;
#else
    u = as_uint2(vload4(0, (const __global ushort*)a));
#endif
  }
  b0[0] = (u.s0 & 0xFFFFu) | (u.s1 << 16);
  b1[0] = (u.s0 >> 16) | (u.s1 & 0xFFFF0000u);
#endif
}

__kernel __attribute__((reqd_work_group_size(32 * QM_WARPS, 1, 1))) void gemm_q_mma(
    int M, int N, int K, float alpha, float beta, __global const GT* A, long a_off, int sam,
    __global const uchar* W, long w_off, long swn, __global GT* C, long c_off, int scm, __global const GT* X,
    long x_off, int sxm, int sxn) {
  __local uint4 stage_all[QM_WARPS][16 * QM_SEGS];
  __local float red[QM_WARPS][16][8];
  const int t = get_local_id(0), lane = t % 32, warp = t / 32;
  const int g = lane / 4, c = lane % 4;
  const int n0 = get_group_id(0) * 16, m0 = get_group_id(1) * 8;
  const int chunks = K / (32 * QM_CB);
  __local uchar* stage = (__local uchar*)stage_all[warp];
  // This lane's 16-byte loads: load i is segment e % QM_SEGS of staged row e / QM_SEGS.
  // Load i of this lane is piece e = lane + 32 i (while e < 16 * QM_SEGS), which lands at e.
  const __global uint4* src[QM_LOADS];
#pragma unroll
  for (int i = 0; i < QM_LOADS; ++i) {
    const int e = lane + 32 * i, r = min(e / QM_SEGS, 15), s = e % QM_SEGS;
    src[i] = (const __global uint4*)(W + (w_off + (long)min(n0 + r, N - 1) * swn) * QBYTES) + s;
  }
#define QM_MINE(i) (lane + 32 * (i) < 16 * QM_SEGS)
  // Activation row m0 + g of this lane's B fragments (lanes past M multiply zeros).
  const bool live = m0 + g < M;
  const __global GT* arow = A + a_off + (long)min(m0 + g, M - 1) * sam + 4 * c;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  uint4 next[QM_LOADS];
  int ch = warp;
  if (ch < chunks) {
#pragma unroll
    for (int i = 0; i < QM_LOADS; ++i)
      if (QM_MINE(i)) next[i] = src[i][(long)ch * QM_SEGS];
  }
  for (; ch < chunks; ch += QM_WARPS) {
    qm_warp_sync();  // the previous chunk's reads of the staging area are done
#pragma unroll
    for (int i = 0; i < QM_LOADS; ++i)
      if (QM_MINE(i)) stage_all[warp][lane + 32 * i] = next[i];
    qm_warp_sync();
    if (ch + QM_WARPS < chunks) {
#pragma unroll
      for (int i = 0; i < QM_LOADS; ++i)
        if (QM_MINE(i)) next[i] = src[i][(long)(ch + QM_WARPS) * QM_SEGS];
    }
#pragma unroll
    for (int b = 0; b < QM_CB; ++b) {
      const int kb = ch * QM_CB + b;
      const __local uchar* r0 = stage + g * QM_RS + b * QBYTES;
      const __local uchar* r8 = r0 + 8 * QM_RS;
      float t0[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#if QTYPE == 2
      float ts[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#endif
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // k 0..15, then 16..31 of the block
        uint b0[QM_TERMS], b1[QM_TERMS];
        qm_act(arow + kb * 32 + 16 * h, live, b0, b1);
#if QTYPE == 0
        // q8_0: bytes 16h + 4c.. as 16 * (high nibble - 8) and the low nibble, signed byte + 128 first
        const uint v0 = qm_word(r0, 2 + 16 * h + 4 * c) ^ 0x80808080u;
        const uint v8 = qm_word(r8, 2 + 16 * h + 4 * c) ^ 0x80808080u;
        const uint lo0 = qm_nib(v0, QM_NEG0), lo2 = qm_nib(v0 >> 8, QM_NEG0);
        const uint lo1 = qm_nib(v8, QM_NEG0), lo3 = qm_nib(v8 >> 8, QM_NEG0);
        const uint hi0 = qm_fma2(((v0 >> 4) & 0x000F000Fu) | QM_MAGIC, QM_SIXTEEN, QM_NEG8X16);
        const uint hi2 = qm_fma2(((v0 >> 12) & 0x000F000Fu) | QM_MAGIC, QM_SIXTEEN, QM_NEG8X16);
        const uint hi1 = qm_fma2(((v8 >> 4) & 0x000F000Fu) | QM_MAGIC, QM_SIXTEEN, QM_NEG8X16);
        const uint hi3 = qm_fma2(((v8 >> 12) & 0x000F000Fu) | QM_MAGIC, QM_SIXTEEN, QM_NEG8X16);
#pragma unroll
        for (int e = 0; e < QM_TERMS; ++e) {
          qm_mma(t0, lo0, lo1, lo2, lo3, b0[e], b1[e]);
          qm_mma(t0, hi0, hi1, hi2, hi3, b0[e], b1[e]);
        }
#else
        // q4: one word of the block's bytes 4c.. serves both halves (low nibbles, then high)
        const uint v0 = qm_word(r0, QOFF_MMA + 4 * c) >> (4 * h);
        const uint v8 = qm_word(r8, QOFF_MMA + 4 * c) >> (4 * h);
        const uint neg = QTYPE == 1 ? QM_NEG8 : QM_NEG0;
        const uint a0 = qm_nib(v0, neg), a2 = qm_nib(v0 >> 8, neg);
        const uint a1 = qm_nib(v8, neg), a3 = qm_nib(v8 >> 8, neg);
#pragma unroll
        for (int e = 0; e < QM_TERMS; ++e) {
          qm_mma(t0, a0, a1, a2, a3, b0[e], b1[e]);
#if QTYPE == 2
          qm_mma(ts, QM_ONE, QM_ONE, QM_ONE, QM_ONE, b0[e], b1[e]);
#endif
        }
#endif
      }
      const float d0 = qm_half(r0, 0), d8 = qm_half(r8, 0);
#if QTYPE == 2
      const float mn0 = qm_half(r0, 2), mn8 = qm_half(r8, 2);
      acc[0] = fma(d0, t0[0], fma(mn0, ts[0], acc[0]));
      acc[1] = fma(d0, t0[1], fma(mn0, ts[1], acc[1]));
      acc[2] = fma(d8, t0[2], fma(mn8, ts[2], acc[2]));
      acc[3] = fma(d8, t0[3], fma(mn8, ts[3], acc[3]));
#else
      acc[0] = fma(d0, t0[0], acc[0]);
      acc[1] = fma(d0, t0[1], acc[1]);
      acc[2] = fma(d8, t0[2], acc[2]);
      acc[3] = fma(d8, t0[3], acc[3]);
#endif
    }
  }
  // C fragment: rows g and g + 8 (weight rows), columns 2c and 2c + 1 (activation rows).
  red[warp][g][2 * c] = acc[0];
  red[warp][g][2 * c + 1] = acc[1];
  red[warp][g + 8][2 * c] = acc[2];
  red[warp][g + 8][2 * c + 1] = acc[3];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int e = t; e < 16 * 8; e += 32 * QM_WARPS) {
    const int r = e / 8, col = e % 8, n = n0 + r, m = m0 + col;
    float s = 0.0f;
#pragma unroll
    for (int w = 0; w < QM_WARPS; ++w) s += red[w][r][col];
    if (n < N && m < M)
      PRISM_STORE(C + c_off + (long)m * scm + n, prism_epilogue(s, alpha, beta, X, x_off, sxm, sxn, m, n));
  }
}
#undef QM_MINE
#endif  // QMMA

#ifdef TM
#define TX (TN / WN)
#define TY (TM / WM)
__kernel __attribute__((reqd_work_group_size(TX, TY, 1))) void gemm_q_tiled(
    int M, int N, int K, float alpha, float beta, __global const GT* A, long a_off, int sam,
    __global const uchar* W, long w_off, long swn, __global GT* C, long c_off, int scm, __global const GT* X,
    long x_off, int sxm, int sxn) {
  __local float as[32][TM + 1];
  __local float ws[32][TN + 1];
  const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * TX + tx;
  const int n0 = get_group_id(0) * TN, m0 = get_group_id(1) * TM;
  const int blocks = K / 32;
  float acc[WM][WN];
#pragma unroll
  for (int i = 0; i < WM; ++i)
#pragma unroll
    for (int j = 0; j < WN; ++j) acc[i][j] = 0.0f;
  for (int kb = 0; kb < blocks; ++kb) {
    // A tile: TM rows x 32, consecutive items along k.
    for (int e = tid; e < TM * 32; e += TX * TY) {
      const int r = e / 32, k = e % 32, m = min(m0 + r, M - 1);
      as[k][r] = PRISM_LOAD(A + a_off + (long)m * sam + kb * 32 + k);
    }
    // Weight tile: TN blocks, each dequantized by one item into a column of ws.
    for (int c = tid; c < TN; c += TX * TY) {
      const __global uchar* p = W + (w_off + (long)min(n0 + c, N - 1) * swn + kb) * QBYTES;
      float16 lo, hi;
      q_values(p, &lo, &hi);
      const float d = q_scale(p);
#if QTYPE == 2
      const float16 mv = (float16)q_min(p);
#else
      const float16 mv = (float16)0.0f;
#endif
      lo = fma((float16)d, lo, mv);
      hi = fma((float16)d, hi, mv);
      float vals[32];
      vstore16(lo, 0, vals);
      vstore16(hi, 1, vals);
#pragma unroll
      for (int k = 0; k < 32; ++k) ws[k][c] = vals[k];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll 4
    for (int k = 0; k < 32; ++k) {
      float av[WM], bv[WN];
#pragma unroll
      for (int i = 0; i < WM; ++i) av[i] = as[k][ty + i * TY];
#pragma unroll
      for (int j = 0; j < WN; ++j) bv[j] = ws[k][tx + j * TX];
#pragma unroll
      for (int i = 0; i < WM; ++i)
#pragma unroll
        for (int j = 0; j < WN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
#pragma unroll
  for (int i = 0; i < WM; ++i)
#pragma unroll
    for (int j = 0; j < WN; ++j) {
      const int m = m0 + ty + i * TY, n = n0 + tx + j * TX;
      if (m < M && n < N)
        PRISM_STORE(C + c_off + (long)m * scm + n, prism_epilogue(acc[i][j], alpha, beta, X, x_off, sxm, sxn, m, n));
    }
}
#endif
