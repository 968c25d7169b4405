// softmax.cl: softmax / log_softmax over the middle axis of a contiguous [outer, R, inner] view.
// Rows kernel (inner == 1): one work-group of WG per row; three sweeps over the row (max, sum of
// exp, write), each strided by WG so neighbouring work-items read neighbouring elements; the row
// stays in cache between sweeps. Cols kernel (inner > 1): one work-item per (outer, inner) lane.
// Defines: A_K (= output kind), LOG (0 softmax, 1 log_softmax), OUT_F32, WG, VEC.
#include "reduce_common.cl"

// 16-bit outputs on CPUs take the cheaper exp of prelude.cl (prism_exp16); GPUs keep the builtin.
#define EXP_V PRISM_EXPV(A_K)
#define EXP_S PRISM_EXPS(A_K)

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
// SCRATCH=1 (the host passes `scr`, WG rows of R floats in local memory, when they fit): the
// sum sweep keeps exp(x - m) in f32 there and the output sweep scales it, so each element costs
// one exp and the output is written once. Without it, f32 outputs hold exp(x - m) and are
// scaled in place, and 16-bit outputs compute exp twice (rounding exp(x - m) to 16 bits first
// would cost up to half an ulp more).
#if VEC == 1
#define LVLOAD(p, i) (p)[i]
#define LVSTORE(p, i, v) ((p)[i] = (v))
#else
#define LVLOAD(p, i) PRISM_XCAT(vload, VEC)(0, (p) + (i))
#define LVSTORE(p, i, v) PRISM_XCAT(vstore, VEC)(v, 0, (p) + (i))
#endif
__kernel void softmax_row_per_item(long rows, long R, __global const STYPE(A_K)* x, long x_off,
                                   __global STYPE(A_K)* o, long o_off, __local float* scr) {
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
#if SCRATCH && !LOG
  __local float* e = scr + get_local_id(0) * R;
  for (long v = 0; v < nv; ++v) {
    const floatv t = EXP_V(VLOAD(A_K, x, v * VEC) - m);
    LVSTORE(e, v * VEC, t);
    vs += t;
  }
  float s = hsum(vs);
  for (long j = nv * VEC; j < R; ++j) {
    const float t = EXP_S(LOAD(A_K, x, j) - m);
    e[j] = t;
    s += t;
  }
  const float inv = 1.0f / s;
  for (long v = 0; v < nv; ++v) VSTORE_NT(A_K, o, v * VEC, LVLOAD(e, v * VEC) * inv, nt);
  for (long j = nv * VEC; j < R; ++j) STORE(A_K, o, j, e[j] * inv);
#elif OUT_F32 && !LOG
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
