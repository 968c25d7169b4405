// SPDX-License-Identifier: Apache-2.0
// norm.cl: layer_norm, rms_norm, fused_add_rms_norm, fused_add_layer_norm and l2_normalize over
// the last dim of contiguous rows.
// One work-group of WG per row; each work-item strides the row by WG (neighbouring work-items
// read neighbouring elements), local-memory tree sums; statistics in f32, the row is re-read
// from cache for the output sweep. Defines: A_K (x/out/residual kind), W_K (weight/bias kind),
// HAS_W, HAS_B, WG.
#include "reduce_common.cl"

#ifndef W_K
#define W_K A_K
#endif

__kernel void layer_norm_rows(long D, __global const STYPE(A_K)* x, long x_off, __global const STYPE(W_K)* w,
                              long w_off, __global const STYPE(W_K)* b, long b_off, __global STYPE(A_K)* o,
                              long o_off, float eps) {
  __local float s[WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0);
  x += x_off + row * D;
  o += o_off + row * D;
  w += w_off;
  b += b_off;
  float acc = 0.0f;
  for (long j = lid; j < D; j += WG) acc += LOAD(A_K, x, j);
  const float mean = wg_sum(s, acc) / (float)D;
  acc = 0.0f;
  for (long j = lid; j < D; j += WG) {
    const float t = LOAD(A_K, x, j) - mean;
    acc += t * t;
  }
  const float rstd = rsqrt(wg_sum(s, acc) / (float)D + eps);
  for (long j = lid; j < D; j += WG) {
    float y = (LOAD(A_K, x, j) - mean) * rstd;
#if HAS_W
    y *= LOAD(W_K, w, j);
#endif
#if HAS_B
    y += LOAD(W_K, b, j);
#endif
    STORE(A_K, o, j, y);
  }
}

__kernel void rms_norm_rows(long D, __global const STYPE(A_K)* x, long x_off, __global const STYPE(W_K)* w,
                            long w_off, __global STYPE(A_K)* o, long o_off, float eps) {
  __local float s[WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0);
  x += x_off + row * D;
  o += o_off + row * D;
  w += w_off;
  float acc = 0.0f;
  for (long j = lid; j < D; j += WG) {
    const float t = LOAD(A_K, x, j);
    acc += t * t;
  }
  const float r = rsqrt(wg_sum(s, acc) / (float)D + eps);
  for (long j = lid; j < D; j += WG) {
#if HAS_W
    STORE(A_K, o, j, LOAD(A_K, x, j) * r * LOAD(W_K, w, j));
#else
    STORE(A_K, o, j, LOAD(A_K, x, j) * r);
#endif
  }
}

// residual <- x + residual (stored), out <- rms_norm(x + residual) * w. The sum is kept in f32
// for the statistics and recomputed (not re-read from the rounded residual) for the output, so
// `out` may alias `x`: each element is read before it is written by the same work-item.
__kernel void fused_add_rms_norm_rows(long D, __global const STYPE(A_K)* x, long x_off, __global STYPE(A_K)* res,
                                      long r_off, __global const STYPE(W_K)* w, long w_off, __global STYPE(A_K)* o,
                                      long o_off, float eps) {
  __local float s[WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0);
  x += x_off + row * D;
  res += r_off + row * D;
  o += o_off + row * D;
  w += w_off;
  float acc = 0.0f;
  for (long j = lid; j < D; j += WG) {
    const float t = LOAD(A_K, x, j) + LOAD(A_K, res, j);
    acc += t * t;
  }
  const float r = rsqrt(wg_sum(s, acc) / (float)D + eps);
  for (long j = lid; j < D; j += WG) {
    const float t = LOAD(A_K, x, j) + LOAD(A_K, res, j);
    STORE(A_K, res, j, t);
#if HAS_W
    STORE(A_K, o, j, t * r * LOAD(W_K, w, j));
#else
    STORE(A_K, o, j, t * r);
#endif
  }
}

// residual <- x + residual (stored), out <- layer_norm(x + residual) * w + b. As above, the sum
// is recomputed in f32 for every sweep, so `out` may alias `x`.
__kernel void fused_add_layer_norm_rows(long D, __global const STYPE(A_K)* x, long x_off, __global STYPE(A_K)* res,
                                        long r_off, __global const STYPE(W_K)* w, long w_off,
                                        __global const STYPE(W_K)* b, long b_off, __global STYPE(A_K)* o,
                                        long o_off, float eps) {
  __local float s[WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0);
  x += x_off + row * D;
  res += r_off + row * D;
  o += o_off + row * D;
  w += w_off;
  b += b_off;
  float acc = 0.0f;
  for (long j = lid; j < D; j += WG) acc += LOAD(A_K, x, j) + LOAD(A_K, res, j);
  const float mean = wg_sum(s, acc) / (float)D;
  acc = 0.0f;
  for (long j = lid; j < D; j += WG) {
    const float t = LOAD(A_K, x, j) + LOAD(A_K, res, j) - mean;
    acc += t * t;
  }
  const float rstd = rsqrt(wg_sum(s, acc) / (float)D + eps);
  for (long j = lid; j < D; j += WG) {
    const float t = LOAD(A_K, x, j) + LOAD(A_K, res, j);
    float y = (t - mean) * rstd;
#if HAS_W
    y *= LOAD(W_K, w, j);
#endif
#if HAS_B
    y += LOAD(W_K, b, j);
#endif
    STORE(A_K, res, j, t);
    STORE(A_K, o, j, y);
  }
}

// out <- x / max(||x||_2, eps) (torch.nn.functional.normalize). w is unused (bound for the
// shared argument list of the row kernels).
__kernel void l2_normalize_rows(long D, __global const STYPE(A_K)* x, long x_off, __global const STYPE(W_K)* w,
                                long w_off, __global STYPE(A_K)* o, long o_off, float eps) {
  __local float s[WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0);
  x += x_off + row * D;
  o += o_off + row * D;
  float acc = 0.0f;
  for (long j = lid; j < D; j += WG) {
    const float t = LOAD(A_K, x, j);
    acc += t * t;
  }
  const float r = 1.0f / fmax(sqrt(wg_sum(s, acc)), eps);
  for (long j = lid; j < D; j += WG) STORE(A_K, o, j, LOAD(A_K, x, j) * r);
}

// Variant 1 (CPUs): one work-item per row, VEC-wide sequential sweeps, no barriers. The row
// (D elements) stays in L1/L2 between the statistics and the output sweep. Variant 2 = variant 1
// compiled with NT=1: streaming stores for the output sweep (reduce_common.cl).
#if HAS_W
#define WV(j) VLOAD(W_K, w, j)
#define WS(j) LOAD(W_K, w, j)
#else
#define WV(j) ((floatv)(1.0f))
#define WS(j) 1.0f
#endif
#if HAS_B
#define BV(j) VLOAD(W_K, b, j)
#define BS(j) LOAD(W_K, b, j)
#else
#define BV(j) ((floatv)(0.0f))
#define BS(j) 0.0f
#endif

__kernel void layer_norm_row_per_item(long rows, long D, __global const STYPE(A_K)* x, long x_off,
                                      __global const STYPE(W_K)* w, long w_off, __global const STYPE(W_K)* b,
                                      long b_off, __global STYPE(A_K)* o, long o_off, float eps) {
  const long row = get_global_id(0);
  if (row >= rows) return;
  x += x_off + row * D;
  o += o_off + row * D;
  w += w_off;
  b += b_off;
  const long nv = D / VEC;
  floatv vs = (floatv)(0.0f);
  for (long v = 0; v < nv; ++v) vs += VLOAD(A_K, x, v * VEC);
  float s = hsum(vs);
  for (long j = nv * VEC; j < D; ++j) s += LOAD(A_K, x, j);
  const float mean = s / (float)D;
  floatv vq = (floatv)(0.0f);
  for (long v = 0; v < nv; ++v) {
    const floatv t = VLOAD(A_K, x, v * VEC) - mean;
    vq += t * t;
  }
  float q = hsum(vq);
  for (long j = nv * VEC; j < D; ++j) {
    const float t = LOAD(A_K, x, j) - mean;
    q += t * t;
  }
  const float rstd = rsqrt(q / (float)D + eps);
  const bool nt = nt_aligned(o);
  for (long v = 0; v < nv; ++v)
    VSTORE_NT(A_K, o, v * VEC, (VLOAD(A_K, x, v * VEC) - mean) * rstd * WV(v * VEC) + BV(v * VEC), nt);
  for (long j = nv * VEC; j < D; ++j) STORE(A_K, o, j, (LOAD(A_K, x, j) - mean) * rstd * WS(j) + BS(j));
  nt_fence();
}

// The sum of squares of one row of D values: VEC-wide partial sums, then the tail one by one.
inline float row_sum_squares(__global const STYPE(A_K)* x, long D) {
  const long nv = D / VEC;
  floatv vq = (floatv)(0.0f);
  for (long v = 0; v < nv; ++v) {
    const floatv t = VLOAD(A_K, x, v * VEC);
    vq += t * t;
  }
  float q = hsum(vq);
  for (long j = nv * VEC; j < D; ++j) {
    const float t = LOAD(A_K, x, j);
    q += t * t;
  }
  return q;
}

__kernel void rms_norm_row_per_item(long rows, long D, __global const STYPE(A_K)* x, long x_off,
                                    __global const STYPE(W_K)* w, long w_off, __global STYPE(A_K)* o, long o_off,
                                    float eps) {
  const long row = get_global_id(0);
  if (row >= rows) return;
  x += x_off + row * D;
  o += o_off + row * D;
  w += w_off;
  const long nv = D / VEC;
  const float q = row_sum_squares(x, D);
  const float r = rsqrt(q / (float)D + eps);
  const bool nt = nt_aligned(o);
  for (long v = 0; v < nv; ++v) VSTORE_NT(A_K, o, v * VEC, VLOAD(A_K, x, v * VEC) * r * WV(v * VEC), nt);
  for (long j = nv * VEC; j < D; ++j) STORE(A_K, o, j, LOAD(A_K, x, j) * r * WS(j));
  nt_fence();
}

__kernel void fused_add_rms_norm_row_per_item(long rows, long D, __global const STYPE(A_K)* x, long x_off,
                                              __global STYPE(A_K)* res, long r_off, __global const STYPE(W_K)* w,
                                              long w_off, __global STYPE(A_K)* o, long o_off, float eps) {
  const long row = get_global_id(0);
  if (row >= rows) return;
  x += x_off + row * D;
  res += r_off + row * D;
  o += o_off + row * D;
  w += w_off;
  const long nv = D / VEC;
  floatv vq = (floatv)(0.0f);
  for (long v = 0; v < nv; ++v) {
    const floatv t = VLOAD(A_K, x, v * VEC) + VLOAD(A_K, res, v * VEC);
    vq += t * t;
  }
  float q = hsum(vq);
  for (long j = nv * VEC; j < D; ++j) {
    const float t = LOAD(A_K, x, j) + LOAD(A_K, res, j);
    q += t * t;
  }
  const float r = rsqrt(q / (float)D + eps);
  // `out` may alias `x`, and `res` is read in this sweep too: streaming stores stay correct since
  // each vector is read before the same work-item overwrites it.
  const bool nt = nt_aligned(o) && nt_aligned(res);
  for (long v = 0; v < nv; ++v) {
    const floatv t = VLOAD(A_K, x, v * VEC) + VLOAD(A_K, res, v * VEC);
    VSTORE_NT(A_K, res, v * VEC, t, nt);
    VSTORE_NT(A_K, o, v * VEC, t * r * WV(v * VEC), nt);
  }
  for (long j = nv * VEC; j < D; ++j) {
    const float t = LOAD(A_K, x, j) + LOAD(A_K, res, j);
    STORE(A_K, res, j, t);
    STORE(A_K, o, j, t * r * WS(j));
  }
  nt_fence();
}

__kernel void fused_add_layer_norm_row_per_item(long rows, long D, __global const STYPE(A_K)* x, long x_off,
                                                __global STYPE(A_K)* res, long r_off, __global const STYPE(W_K)* w,
                                                long w_off, __global const STYPE(W_K)* b, long b_off,
                                                __global STYPE(A_K)* o, long o_off, float eps) {
  const long row = get_global_id(0);
  if (row >= rows) return;
  x += x_off + row * D;
  res += r_off + row * D;
  o += o_off + row * D;
  w += w_off;
  b += b_off;
  const long nv = D / VEC;
  floatv vs = (floatv)(0.0f);
  for (long v = 0; v < nv; ++v) vs += VLOAD(A_K, x, v * VEC) + VLOAD(A_K, res, v * VEC);
  float s = hsum(vs);
  for (long j = nv * VEC; j < D; ++j) s += LOAD(A_K, x, j) + LOAD(A_K, res, j);
  const float mean = s / (float)D;
  floatv vq = (floatv)(0.0f);
  for (long v = 0; v < nv; ++v) {
    const floatv t = VLOAD(A_K, x, v * VEC) + VLOAD(A_K, res, v * VEC) - mean;
    vq += t * t;
  }
  float q = hsum(vq);
  for (long j = nv * VEC; j < D; ++j) {
    const float t = LOAD(A_K, x, j) + LOAD(A_K, res, j) - mean;
    q += t * t;
  }
  const float rstd = rsqrt(q / (float)D + eps);
  // As in fused_add_rms_norm: every vector is read before this work-item overwrites it.
  const bool nt = nt_aligned(o) && nt_aligned(res);
  for (long v = 0; v < nv; ++v) {
    const floatv t = VLOAD(A_K, x, v * VEC) + VLOAD(A_K, res, v * VEC);
    VSTORE_NT(A_K, res, v * VEC, t, nt);
    VSTORE_NT(A_K, o, v * VEC, (t - mean) * rstd * WV(v * VEC) + BV(v * VEC), nt);
  }
  for (long j = nv * VEC; j < D; ++j) {
    const float t = LOAD(A_K, x, j) + LOAD(A_K, res, j);
    STORE(A_K, res, j, t);
    STORE(A_K, o, j, (t - mean) * rstd * WS(j) + BS(j));
  }
  nt_fence();
}

__kernel void l2_normalize_row_per_item(long rows, long D, __global const STYPE(A_K)* x, long x_off,
                                        __global const STYPE(W_K)* w, long w_off, __global STYPE(A_K)* o,
                                        long o_off, float eps) {
  const long row = get_global_id(0);
  if (row >= rows) return;
  x += x_off + row * D;
  o += o_off + row * D;
  const long nv = D / VEC;
  const float q = row_sum_squares(x, D);
  const float r = 1.0f / fmax(sqrt(q), eps);
  const bool nt = nt_aligned(o);
  for (long v = 0; v < nv; ++v) VSTORE_NT(A_K, o, v * VEC, VLOAD(A_K, x, v * VEC) * r, nt);
  for (long j = nv * VEC; j < D; ++j) STORE(A_K, o, j, LOAD(A_K, x, j) * r);
  nt_fence();
}
