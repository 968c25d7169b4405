// SPDX-License-Identifier: Apache-2.0
// cast.cl: copy with conversion between any two storage kinds (A_K -> O_K); integer kinds
// convert exactly through long, floats through f32 (float -> int truncates and saturates, NaN
// -> 0). Flat path: grid-stride over elements, VEC-wide when both kinds are float; strided
// path: index -> offsets over the host-merged dims.
#if !A_IS_INT && !O_IS_INT && VEC > 1
#define CAST_VECTOR 1
#else
#define CAST_VECTOR 0
#endif

inline void cvt1(const __global STYPE(A_K)* a, long ia, __global STYPE(O_K)* o, long io) {
#if A_IS_INT
  STOREL(O_K, o, io, LOADL(A_K, a, ia));
#else
  STORE(O_K, o, io, LOAD(A_K, a, ia));
#endif
}

__kernel void cast_flat(long n, __global const STYPE(A_K)* a, long a_off, __global STYPE(O_K)* o, long o_off) {
  a += a_off;
  o += o_off;
  const long g = get_global_id(0), G = get_global_size(0);
#if CAST_VECTOR
  const long nv = n / VEC, L = get_local_size(0);
  const long base = get_group_id(0) * L * EPT + get_local_id(0);  // block per work-group, as ew_flat
  for (int k = 0; k < EPT; ++k) {
    const long v = base + (long)k * L;
    if (v < nv) VSTORE(O_K, o, v * VEC, VLOAD(A_K, a, v * VEC));
  }
  const long t = nv * VEC + g;
  if (t < n) cvt1(a, t, o, t);
#else
  for (long i = g; i < n; i += G) cvt1(a, i, o, i);
#endif
}

__kernel void cast_strided(long n, int nd, long8 shape, __global const STYPE(A_K)* a, long a_off, long8 sa,
                           __global STYPE(O_K)* o, long o_off, long8 so) {
  long sh[8], s_a[8], s_o[8];
  vstore8(shape, 0, sh);
  vstore8(sa, 0, s_a);
  vstore8(so, 0, s_o);
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    long idx = i, oa = a_off, oo = o_off;
    for (int d = nd - 1; d >= 0; --d) {
      const long c = idx % sh[d];
      idx /= sh[d];
      oa += c * s_a[d];
      oo += c * s_o[d];
    }
    cvt1(a, oa, o, oo);
  }
}

// fill / arange into a contiguous output: value (float kinds) or ivalue (integer kinds), and
// start + i * step for arange.
__kernel void fill_flat(long n, __global STYPE(O_K)* o, long o_off, float value, long ivalue) {
  o += o_off;
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
#if O_IS_INT
    STOREL(O_K, o, i, ivalue);
#else
    STORE(O_K, o, i, value);
#endif
  }
}

__kernel void arange_flat(long n, __global STYPE(O_K)* o, long o_off, float start, float step, long istart,
                          long istep) {
  o += o_off;
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
#if O_IS_INT
    STOREL(O_K, o, i, istart + i * istep);
#else
    STORE(O_K, o, i, start + (float)i * step);
#endif
  }
}
