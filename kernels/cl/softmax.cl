// SPDX-License-Identifier: Apache-2.0
// softmax.cl: softmax / log_softmax over the middle axis of a contiguous [outer, R, inner] view.
// Rows kernel (inner == 1): one work-group of WG per row; three sweeps over the row (max, sum of
// exp, write), each strided by WG so neighbouring work-items read neighbouring elements; the row
// stays in cache between sweeps. Cols kernel (inner > 1): one work-item per (outer, inner) lane.
// Defines: A_K (= output kind), LOG (0 softmax, 1 log_softmax), OUT_F32, WG, VEC.
#include "reduce_common.cl"

// exp(x - m), x - m <= 0: on CPUs prism_expn (prelude.cl, f32 accuracy in fewer instructions
// than the builtin) for f32 outputs and for log_softmax (log(sum) is an absolute error in its
// output, so it needs f32 accuracy for every kind), and the cheaper 16-bit exps for f16/bf16
// softmax. GPUs keep the builtin (hardware exp2).
#if PRISM_CPU && (OUT_F32 || LOG)
#define EXP_V prism_expnv
#define EXP_S prism_expn
#else
#define EXP_V PRISM_EXPV(A_K)  // the 16-bit exps on CPUs; the builtin on GPUs
#define EXP_S PRISM_EXPS(A_K)
#endif

inline float sm_out(float x, float m, float s, float logs) {
#if LOG
  return x - m - logs;
#else
  return EXP_S(x - m) / s;
#endif
}

__kernel void softmax_rows(long R, __global const STYPE(A_K)* x, long x_off, __global STYPE(A_K)* o, long o_off) {
  __local float s[WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0);
  x += x_off + row * R;
  o += o_off + row * R;
  float m = -INFINITY;
  for (long j = lid; j < R; j += WG) m = nan_max(m, LOAD(A_K, x, j));
  m = wg_max(s, m);
  if (isinf(m) && m < 0) m = 0.0f;  // all -inf row: exp(x - 0) = 0, then 0/0 = NaN like PyTorch
  float acc = 0.0f;
  for (long j = lid; j < R; j += WG) acc += EXP_S(LOAD(A_K, x, j) - m);
  acc = wg_sum(s, acc);
  const float logs = log(acc);
  for (long j = lid; j < R; j += WG) STORE(A_K, o, j, sm_out(LOAD(A_K, x, j), m, acc, logs));
}

__kernel void softmax_cols(long outer, long R, long inner, __global const STYPE(A_K)* x, long x_off,
                           __global STYPE(A_K)* o, long o_off) {
  const long g = get_global_id(0);
  if (g >= outer * inner) return;
  const long ob = g / inner, j = g % inner;
  x += x_off + ob * R * inner + j;
  o += o_off + ob * R * inner + j;
  float m = -INFINITY;
  for (long r = 0; r < R; ++r) m = nan_max(m, LOAD(A_K, x, r * inner));
  if (isinf(m) && m < 0) m = 0.0f;
  float acc = 0.0f;
  for (long r = 0; r < R; ++r) acc += EXP_S(LOAD(A_K, x, r * inner) - m);
  const float logs = log(acc);
  for (long r = 0; r < R; ++r) STORE(A_K, o, r * inner, sm_out(LOAD(A_K, x, r * inner), m, acc, logs));
}

// Variant 1 (CPUs): one work-item per row, VEC-wide sequential sweeps, no barriers. Variant 2 =
// variant 1 compiled with NT=1: streaming stores for the output sweep (reduce_common.cl).
// When the host can give each work-item its f32 scratch rows in local memory it launches
// softmax_row_block below instead; this kernel is the fallback for longer rows: f32 outputs hold
// exp(x - m) and are scaled in place, and 16-bit outputs compute exp twice (rounding exp(x - m)
// to 16 bits first would cost up to half an ulp more).
__kernel void softmax_row_per_item(long rows, long R, __global const STYPE(A_K)* x, long x_off,
                                   __global STYPE(A_K)* o, long o_off) {
  const long row = get_global_id(0);
  if (row >= rows) return;
  x += x_off + row * R;
  o += o_off + row * R;
  const long nv = R / VEC;
  // The max skips NaNs (one compare + blend per vector): a NaN still reaches every output through
  // the sum of exp(x - m), as with the NaN-propagating max of the other kernels.
  floatv vm = (floatv)(-INFINITY);
  for (long v = 0; v < nv; ++v) {
    const floatv t = VLOAD(A_K, x, v * VEC);
    vm = select(vm, t, t > vm);
  }
  float m = hmax(vm);
  for (long j = nv * VEC; j < R; ++j) m = fmax(m, LOAD(A_K, x, j));
  if (isinf(m) && m < 0) m = 0.0f;
  floatv vs = (floatv)(0.0f);
  const bool nt = nt_aligned(o);
#if OUT_F32 && !LOG
  for (long v = 0; v < nv; ++v) {
    const floatv t = EXP_V(VLOAD(A_K, x, v * VEC) - m);
    VSTORE(A_K, o, v * VEC, t);
    vs += t;
  }
  float s = hsum(vs);
  for (long j = nv * VEC; j < R; ++j) {
    const float t = EXP_S(LOAD(A_K, x, j) - m);
    STORE(A_K, o, j, t);
    s += t;
  }
  const float inv = 1.0f / s;
  for (long v = 0; v < nv; ++v) VSTORE_NT(A_K, o, v * VEC, VLOAD(A_K, o, v * VEC) * inv, nt);
  for (long j = nv * VEC; j < R; ++j) STORE(A_K, o, j, LOAD(A_K, o, j) * inv);
#else
  for (long v = 0; v < nv; ++v) vs += EXP_V(VLOAD(A_K, x, v * VEC) - m);
  float s = hsum(vs);
  for (long j = nv * VEC; j < R; ++j) s += EXP_S(LOAD(A_K, x, j) - m);
  const float logs = log(s);
#if LOG
  for (long v = 0; v < nv; ++v) VSTORE_NT(A_K, o, v * VEC, VLOAD(A_K, x, v * VEC) - m - logs, nt);
#else
  const float inv = 1.0f / s;
  for (long v = 0; v < nv; ++v) VSTORE_NT(A_K, o, v * VEC, EXP_V(VLOAD(A_K, x, v * VEC) - m) * inv, nt);
#endif
  for (long j = nv * VEC; j < R; ++j) STORE(A_K, o, j, sm_out(LOAD(A_K, x, j), m, s, logs));
#endif
  nt_fence();
}

// Variants 1 and 2 when the scratch rows fit (softmax_row_block): each work-item owns a block of
// consecutive rows and software-pipelines them. One sweep per row r writes row r - 1 from its
// scratch row, computes exp(x - m) of row r into scratch and reads row r + 1 for its max. The
// row it reads from memory is never the row it spends the exp on, so memory traffic overlaps
// the exp arithmetic; with three separate sweeps per row a 2-core CPU alternated between
// waiting for memory and computing (figures: benchmarks/RESULTS.md, "session 3"). Local memory
// per work-item: e (exp values, or for LOG the row's x) and, for 16-bit rows, b (the next row
// in f32, so each element is converted once; f32 rows are read again from cache instead). The
// row block per work-item is ceil(rows / global size).
#if VEC == 1
typedef float floatv_u;
#else
typedef floatv __attribute__((aligned(4))) floatv_u;  // scratch rows are only float-aligned
#endif
#define SCR(p, i) (*(__local floatv_u*)((p) + (i)))
#if OUT_F32
#define CUR_V(v) VLOAD(A_K, xc, (v) * VEC)
#define CUR_S(j) xc[j]
#define KEEP_V(v, u) ((void)0)
#define KEEP_S(j, u) ((void)0)
#else
#define CUR_V(v) SCR(b, (v) * VEC)
#define CUR_S(j) b[j]
#define KEEP_V(v, u) (SCR(b, (v) * VEC) = (u))
#define KEEP_S(j, u) (b[j] = (u))
#endif
#if LOG
#define BLOCK_KEEP(x, t) (x)               // e keeps x; the output is x - (m + log s)
#define BLOCK_OUT(ev, c) ((ev) - (c))
#else
#define BLOCK_KEEP(x, t) (t)               // e keeps exp(x - m); the output is e / s
#define BLOCK_OUT(ev, c) ((ev) * (c))
#endif
__kernel void softmax_row_block(long rows, long R, __global const STYPE(A_K)* x, long x_off,
                                __global STYPE(A_K)* o, long o_off, __local float* scr) {
  const long per = (rows + (long)get_global_size(0) - 1) / (long)get_global_size(0);
  const long r0 = get_global_id(0) * per;
  const long r1 = min(rows, r0 + per);
  if (r0 >= r1) return;
  x += x_off;
  o += o_off;
  __local float* e = scr + get_local_id(0) * (OUT_F32 ? 1 : 2) * R;
  __local float* b = e + R;  // unused for f32
  const long nv = R / VEC;
  float m = -INFINITY;
  {
    const __global STYPE(A_K)* xr = x + r0 * R;
    floatv vm = (floatv)(-INFINITY);
    for (long v = 0; v < nv; ++v) {
      const floatv u = VLOAD(A_K, xr, v * VEC);
      KEEP_V(v, u);
      vm = select(vm, u, u > vm);  // skips NaNs; they reach every output through the sum
    }
    m = hmax(vm);
    for (long j = nv * VEC; j < R; ++j) {
      const float u = LOAD(A_K, xr, j);
      KEEP_S(j, u);
      m = fmax(m, u);
    }
  }
  float c = 0.0f;  // the previous row's output constant: 1 / s, or m + log s for LOG
  for (long r = r0; r <= r1; ++r) {
    const bool prev = r > r0, cur = r < r1, next = r + 1 < r1;
    if (isinf(m) && m < 0) m = 0.0f;  // all -inf row: exp(x - 0) = 0, then 0/0 = NaN like PyTorch
    __global STYPE(A_K)* op = o + (r - 1) * R;
    const __global STYPE(A_K)* xc = x + r * R;
    const __global STYPE(A_K)* xn = x + (r + 1) * R;
    const bool nt = prev && nt_aligned(op);
    floatv vs = (floatv)(0.0f), vm = (floatv)(-INFINITY);
// The steady state, without per-vector conditions (NT_ is a constant in each copy).
#define BLOCK_STEADY(NT_)                                                   \
  for (long v = 0; v < nv; ++v) {                                           \
    VSTORE_NT(A_K, op, v * VEC, BLOCK_OUT(SCR(e, v * VEC), c), NT_);        \
    const floatv xv = CUR_V(v), t = EXP_V(xv - m);                          \
    SCR(e, v * VEC) = BLOCK_KEEP(xv, t);                                    \
    vs += t;                                                                \
    const floatv u = VLOAD(A_K, xn, v * VEC);                               \
    KEEP_V(v, u);                                                           \
    vm = select(vm, u, u > vm);                                             \
  }
    if (prev && cur && next && nt) {
      BLOCK_STEADY(true)
    } else if (prev && cur && next) {
      BLOCK_STEADY(false)
    } else {
      for (long v = 0; v < nv; ++v) {
        if (prev) VSTORE_NT(A_K, op, v * VEC, BLOCK_OUT(SCR(e, v * VEC), c), nt);
        if (cur) {
          const floatv xv = CUR_V(v), t = EXP_V(xv - m);
          SCR(e, v * VEC) = BLOCK_KEEP(xv, t);
          vs += t;
        }
        if (next) {
          const floatv u = VLOAD(A_K, xn, v * VEC);
          KEEP_V(v, u);
          vm = select(vm, u, u > vm);
        }
      }
    }
    float s = hsum(vs), mn = hmax(vm);
    for (long j = nv * VEC; j < R; ++j) {
      if (prev) STORE(A_K, op, j, BLOCK_OUT(e[j], c));
      if (cur) {
        const float xv = CUR_S(j), t = EXP_S(xv - m);
        e[j] = BLOCK_KEEP(xv, t);
        s += t;
      }
      if (next) {
        const float u = LOAD(A_K, xn, j);
        KEEP_S(j, u);
        mn = fmax(mn, u);
      }
    }
    if (nt) nt_fence();
#if LOG
    c = m + log(s);
#else
    c = 1.0f / s;
#endif
    m = mn;
  }
}
