// SPDX-License-Identifier: Apache-2.0
// reduce.cl: sum / mean / max / min / argmax over the middle axis of a contiguous [outer, R,
// inner] view (the host permutes/copies other layouts into it). Rows kernel (inner == 1): one
// work-group of WG per row, each work-item strides over the row VEC elements at a time
// (coalesced), then a local-memory tree. Cols kernel (inner > 1): one work-item per output,
// walking R with stride inner (neighbouring work-items read neighbouring addresses).
// Defines: A_K, O_K, RED_<sum|mean|max|min|argmax>, WG, VEC. Accumulation in f32.
#include "reduce_common.cl"

#if defined(RED_sum) || defined(RED_mean)
#define INIT 0.0f
#define COMBINE(a, b) ((a) + (b))
#elif defined(RED_max)
#define INIT (-INFINITY)
#define COMBINE(a, b) nan_max(a, b)
#elif defined(RED_min)
#define INIT (INFINITY)
#define COMBINE(a, b) nan_min(a, b)
#endif

#ifdef RED_argmax
// (value, index) pair order: NaN beats numbers, larger beats smaller, ties go to the lower index.
inline int better(float v, long i, float w, long j) {
  if (isnan(v) != isnan(w)) return isnan(v);
  if (isnan(v)) return i < j;
  return v > w || (v == w && i < j);
}

// Vector t (elements VEC c ..): looked inside only when it may hold a new best (bi == R: nothing
// taken yet, as in a row of -inf; a NaN; a value above bv).
#define ARGMAX_VEC(t, c)                                                \
  if (bi == R || any(isnan(t)) || vmax(t) > bv)                         \
    for (int k = 0; k < VEC; ++k)                                       \
      if (better(((const float*)&(t))[k], (c) * VEC + k, bv, bi)) {     \
        bv = ((const float*)&(t))[k];                                   \
        bi = (c) * VEC + k;                                             \
      }

// The group's best of every item's (bv, bi), left in sv[0], si[0] (every item calls it; it ends
// on a barrier).
void argmax_tree(float bv, long bi, __local float* sv, __local long* si) {
  const int lid = get_local_id(0);
  sv[lid] = bv;
  si[lid] = bi;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = WG / 2; w > 0; w >>= 1) {
    if (lid < w && better(sv[lid + w], si[lid + w], sv[lid], si[lid])) {
      sv[lid] = sv[lid + w];
      si[lid] = si[lid + w];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

// The group's best (value, index) over x[lo .. hi) of a row of R (lo a multiple of VEC), left in
// sv[0], si[0] (every item calls it; it ends on a barrier). A work-item's indices rise, so ties
// keep the first.
void argmax_slice(__global const STYPE(A_K)* x, long lo, long hi, long R, __local float* sv, __local long* si) {
  const int lid = get_local_id(0);
  float bv = -INFINITY;
  long bi = R;  // sentinel: loses every tie
  long j = lo + lid;
#if VEC > 1
  // VEC-wide loads, and the per-element pass only where ARGMAX_VEC's test asks for it, so a long
  // row (a vocabulary's logits) costs a vector max per VEC elements. On GPUs four vectors are
  // loaded before any is looked at: each item keeps four loads in flight.
  const long nv = hi / VEC;
  long c = lo / VEC + lid;
#if !PRISM_CPU  // CPUs step one vector at a time (no faster with four on PoCL 3.1, within its noise)
  for (; c + 3 * WG < nv; c += 4 * WG) {
    const floatv t0 = VLOAD(A_K, x, c * VEC), t1 = VLOAD(A_K, x, (c + WG) * VEC);
    const floatv t2 = VLOAD(A_K, x, (c + 2 * WG) * VEC), t3 = VLOAD(A_K, x, (c + 3 * WG) * VEC);
    ARGMAX_VEC(t0, c);
    ARGMAX_VEC(t1, c + WG);
    ARGMAX_VEC(t2, c + 2 * WG);
    ARGMAX_VEC(t3, c + 3 * WG);
  }
#endif
  for (; c < nv; c += WG) {
    const floatv t = VLOAD(A_K, x, c * VEC);
    ARGMAX_VEC(t, c);
  }
  j = max(lo, nv * VEC) + lid;
#endif
  for (; j < hi; j += WG) {
    const float v = LOAD(A_K, x, j);
    if (better(v, j, bv, bi)) {
      bv = v;
      bi = j;
    }
  }
  argmax_tree(bv, bi, sv, si);
}

__kernel void reduce_rows(long R, __global const STYPE(A_K)* x, long x_off, __global STYPE(O_K)* o, long o_off) {
  __local float sv[WG];
  __local long si[WG];
  const long row = get_group_id(0);
  argmax_slice(x + x_off + row * R, 0, R, R, sv, si);
  if (get_local_id(0) == 0) STOREL(O_K, o, o_off + row, si[0]);
}

// A few long rows (greedy decode's argmax over a vocabulary: one row, 150k logits took one
// work-group ~39 us on the H200): G work-groups a row (config sg), group g taking the g-th slice
// of VEC-aligned length, its winner to part: values [rows, G], then their indices [rows, G] as
// the floats' bits (the counters' buffer is shared with other ops' counters, so it holds nothing
// else). The last group of a row to count itself in at ctr[row] (an atomic counter, zero between
// launches: that group resets it) picks among the G winners, ties by index, so the first best
// still wins. Indices fit an int (the host checks R < 2^31).
#include "split_arrival.cl"  // last_split
__kernel void reduce_rows_split(long R, int G, __global const STYPE(A_K)* x, long x_off, __global STYPE(O_K)* o,
                                long o_off, __global float* part, __global int* ctr) {
  __local float sv[WG];
  __local long si[WG];
  __local int last;
  const long row = get_group_id(0) / G;
  const int g = get_group_id(0) % G;
  __global float* pv = part;
  __global int* pi = (__global int*)(part + get_num_groups(0));
  const long slice = (R + (long)G * VEC - 1) / ((long)G * VEC) * VEC;
  const long lo = min(R, g * slice), hi = min(R, lo + slice);
  argmax_slice(x + x_off + row * R, lo, hi, R, sv, si);
  if (get_local_id(0) == 0) {
    pv[row * G + g] = sv[0];
    pi[row * G + g] = (int)si[0];
  }
  if (!last_split(ctr + row, G, &last)) return;  // uniform over the group
  // The G winners, one an item (volatile: L2 round trips, the other groups' stores), then the
  // group's tree; better() orders ties by index, so the first best wins in any order.
  const int lid = get_local_id(0);
  volatile __global const float* v = pv + row * G;
  volatile __global const int* ix = pi + row * G;
  float bv = -INFINITY;
  long bi = R;
  for (int t = lid; t < G; t += WG)
    if (better(v[t], ix[t], bv, bi)) {
      bv = v[t];
      bi = ix[t];
    }
  argmax_tree(bv, bi, sv, si);
  if (lid == 0) {
    STOREL(O_K, o, o_off + row, si[0]);
    ctr[row] = 0;  // for the next launch
  }
}

__kernel void reduce_cols(long outer, long R, long inner, __global const STYPE(A_K)* x, long x_off,
                          __global STYPE(O_K)* o, long o_off) {
  const long g = get_global_id(0);
  if (g >= outer * inner) return;
  const long ob = g / inner, j = g % inner;
  x += x_off + ob * R * inner + j;
  float bv = -INFINITY;
  long bi = R;
  for (long r = 0; r < R; ++r) {
    const float v = LOAD(A_K, x, r * inner);
    if (better(v, r, bv, bi)) {
      bv = v;
      bi = r;
    }
  }
  STOREL(O_K, o, o_off + g, bi);
}
#else

#if defined(RED_max) || defined(RED_min)
#define WG_REDUCE(s, v) wg_minmax(s, v)
inline float wg_minmax(__local float* s, float v) {
  const int lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = WG / 2; w > 0; w >>= 1) {
    if (lid < w) s[lid] = COMBINE(s[lid], s[lid + w]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
#else
#define WG_REDUCE(s, v) wg_sum(s, v)
#endif

__kernel void reduce_rows(long R, __global const STYPE(A_K)* x, long x_off, __global STYPE(O_K)* o, long o_off) {
  __local float s[WG];
  const long row = get_group_id(0);
  const int lid = get_local_id(0);
  x += x_off + row * R;
  float acc = INIT;
#if VEC > 1
  const long nv = R / VEC;
  for (long v = lid; v < nv; v += WG) {
    const floatv t = VLOAD(A_K, x, v * VEC);
    for (int k = 0; k < VEC; ++k) acc = COMBINE(acc, ((float*)&t)[k]);
  }
  for (long j = nv * VEC + lid; j < R; j += WG) acc = COMBINE(acc, LOAD(A_K, x, j));
#else
  for (long j = lid; j < R; j += WG) acc = COMBINE(acc, LOAD(A_K, x, j));
#endif
  acc = WG_REDUCE(s, acc);
#ifdef RED_mean
  acc = acc / (float)R;
#endif
  if (lid == 0) STORE(O_K, o, o_off + row, acc);
}

__kernel void reduce_cols(long outer, long R, long inner, __global const STYPE(A_K)* x, long x_off,
                          __global STYPE(O_K)* o, long o_off) {
  const long g = get_global_id(0);
  if (g >= outer * inner) return;
  const long ob = g / inner, j = g % inner;
  x += x_off + ob * R * inner + j;
  float acc = INIT;
  for (long r = 0; r < R; ++r) acc = COMBINE(acc, LOAD(A_K, x, r * inner));
#ifdef RED_mean
  acc = acc / (float)R;
#endif
  STORE(O_K, o, o_off + g, acc);
}
// Variant 1 (CPUs): one work-item per row, VEC-wide sequential loads into vector accumulators;
// no barriers (PoCL runs barrier-free work-groups as plain loops).
#if defined(RED_sum) || defined(RED_mean)
#define VCOMBINE(a, b) ((a) + (b))
#define HFOLD(v) hsum(v)
#elif defined(RED_max)
#define VCOMBINE(a, b) nan_maxv(a, b)
#define HFOLD(v) hmax(v)
#else
#define VCOMBINE(a, b) nan_minv(a, b)
#define HFOLD(v) hmin(v)
#endif
__kernel void reduce_row_per_item(long rows, long R, __global const STYPE(A_K)* x, long x_off,
                                  __global STYPE(O_K)* o, long o_off) {
  const long row = get_global_id(0);
  if (row >= rows) return;
  x += x_off + row * R;
  floatv vacc = (floatv)(INIT);
  const long nv = R / VEC;
  for (long v = 0; v < nv; ++v) vacc = VCOMBINE(vacc, VLOAD(A_K, x, v * VEC));
  float acc = HFOLD(vacc);
  for (long j = nv * VEC; j < R; ++j) acc = COMBINE(acc, LOAD(A_K, x, j));
#ifdef RED_mean
  acc = acc / (float)R;
#endif
  STORE(O_K, o, o_off + row, acc);
}
#endif
