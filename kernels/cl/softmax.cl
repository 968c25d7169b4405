// softmax.cl: softmax / log_softmax over the middle axis of a contiguous [outer, R, inner] view.
// Rows kernel (inner == 1): one work-group of WG per row; three sweeps over the row (max, sum of
// exp, write), each strided by WG so neighbouring work-items read neighbouring elements; the row
// stays in cache between sweeps. Cols kernel (inner > 1): one work-item per (outer, inner) lane.
// Defines: A_K (= output kind), LOG (0 softmax, 1 log_softmax), OUT_F32, WG, VEC.
#include "reduce_common.cl"

inline float sm_out(float x, float m, float s, float logs) {
#if LOG
  return x - m - logs;
#else
  return exp(x - m) / s;
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
  for (long j = lid; j < R; j += WG) acc += exp(LOAD(A_K, x, j) - m);
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
  for (long r = 0; r < R; ++r) acc += exp(LOAD(A_K, x, r * inner) - m);
  const float logs = log(acc);
  for (long r = 0; r < R; ++r) STORE(A_K, o, r * inner, sm_out(LOAD(A_K, x, r * inner), m, acc, logs));
}

// Variant 1 (CPUs): one work-item per row, VEC-wide sequential sweeps, no barriers.
__kernel void softmax_row_per_item(long rows, long R, __global const STYPE(A_K)* x, long x_off,
                                   __global STYPE(A_K)* o, long o_off) {
  const long row = get_global_id(0);
  if (row >= rows) return;
  x += x_off + row * R;
  o += o_off + row * R;
  const long nv = R / VEC;
  floatv vm = (floatv)(-INFINITY);
  for (long v = 0; v < nv; ++v) vm = nan_maxv(vm, VLOAD(A_K, x, v * VEC));
  float m = hmax(vm);
  for (long j = nv * VEC; j < R; ++j) m = nan_max(m, LOAD(A_K, x, j));
  if (isinf(m) && m < 0) m = 0.0f;
  floatv vs = (floatv)(0.0f);
#if OUT_F32 && !LOG
  // f32 output: store exp(x - m) while summing, then scale in place (one exp per element; the
  // row is still in cache).
  for (long v = 0; v < nv; ++v) {
    const floatv e = exp(VLOAD(A_K, x, v * VEC) - m);
    VSTORE(A_K, o, v * VEC, e);
    vs += e;
  }
  float s = hsum(vs);
  for (long j = nv * VEC; j < R; ++j) {
    const float e = exp(LOAD(A_K, x, j) - m);
    STORE(A_K, o, j, e);
    s += e;
  }
  const float inv = 1.0f / s;
  for (long v = 0; v < nv; ++v) VSTORE(A_K, o, v * VEC, VLOAD(A_K, o, v * VEC) * inv);
  for (long j = nv * VEC; j < R; ++j) STORE(A_K, o, j, LOAD(A_K, o, j) * inv);
#else
  for (long v = 0; v < nv; ++v) vs += exp(VLOAD(A_K, x, v * VEC) - m);
  float s = hsum(vs);
  for (long j = nv * VEC; j < R; ++j) s += exp(LOAD(A_K, x, j) - m);
  const float logs = log(s);
#if LOG
  for (long v = 0; v < nv; ++v) VSTORE(A_K, o, v * VEC, VLOAD(A_K, x, v * VEC) - m - logs);
#else
  const float inv = 1.0f / s;
  for (long v = 0; v < nv; ++v) VSTORE(A_K, o, v * VEC, exp(VLOAD(A_K, x, v * VEC) - m) * inv);
#endif
  for (long j = nv * VEC; j < R; ++j) STORE(A_K, o, j, sm_out(LOAD(A_K, x, j), m, s, logs));
#endif
}
