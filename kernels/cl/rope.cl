// SPDX-License-Identifier: Apache-2.0
// rope.cl: rotary position embedding in place on query [T, Hq, D] and key [T, Hk, D] (last dim
// contiguous, token/head strides free, so views of a fused qkv tensor work). The cache is
// [max_pos, rot] with cos in the first rot/2 columns and sin in the rest. One work-item per
// (token, head, pair); NEOX pairs (i, i + rot/2), GPT-J pairs (2i, 2i + 1). A position outside
// [0, max_pos) leaves its token unrotated (never reads outside the cache).
// Defines: A_K (q/k kind), C_K (cache kind), P_K (positions kind), NEOX.
inline void rotate(__global STYPE(A_K)* x, long hr, long i, float c, float s) {
#if NEOX
  const long i1 = i, i2 = i + hr;
#else
  const long i1 = 2 * i, i2 = 2 * i + 1;
#endif
  const float x1 = LOAD(A_K, x, i1), x2 = LOAD(A_K, x, i2);
  STORE(A_K, x, i1, x1 * c - x2 * s);
  STORE(A_K, x, i2, x2 * c + x1 * s);
}

__kernel void rope(long T, long hq, long hk, long hr, long max_pos, __global const STYPE(P_K)* pos, long p_off,
                   __global STYPE(A_K)* q, long q_off, long q_st, long q_sh, __global STYPE(A_K)* k, long k_off,
                   long k_st, long k_sh, __global const STYPE(C_K)* cache, long c_off) {
  const long g = get_global_id(0);
  const long per_token = (hq + hk) * hr;
  if (g >= T * per_token) return;
  const long t = g / per_token, rem = g % per_token;
  const long h = rem / hr, i = rem % hr;
  const long p = LOADL(P_K, pos, p_off + t);
  if (p < 0 || p >= max_pos) return;
  const float c = LOAD(C_K, cache, c_off + p * 2 * hr + i);
  const float s = LOAD(C_K, cache, c_off + p * 2 * hr + hr + i);
  if (h < hq)
    rotate(q + q_off + t * q_st + h * q_sh, hr, i, c, s);
  else
    rotate(k + k_off + t * k_st + (h - hq) * k_sh, hr, i, c, s);
}

// Variant 1: one work-item per (head, token) sweeping its head's pairs, VEC-wide for NeoX (both
// halves and the cos/sin rows are contiguous runs); no index division per element.
__kernel void rope_per_head(long T, long hq, long hk, long hr, long max_pos, __global const STYPE(P_K)* pos,
                            long p_off, __global STYPE(A_K)* q, long q_off, long q_st, long q_sh,
                            __global STYPE(A_K)* k, long k_off, long k_st, long k_sh, __global const STYPE(C_K)* cache,
                            long c_off) {
  const long h = get_global_id(0), t = get_global_id(1);
  if (h >= hq + hk || t >= T) return;
  const long p = LOADL(P_K, pos, p_off + t);
  if (p < 0 || p >= max_pos) return;
  __global STYPE(A_K)* x = h < hq ? q + q_off + t * q_st + h * q_sh : k + k_off + t * k_st + (h - hq) * k_sh;
  __global const STYPE(C_K)* cs = cache + c_off + p * 2 * hr;
  long i = 0;
#if NEOX
  for (; i + VEC <= hr; i += VEC) {
    const floatv c = VLOAD(C_K, cs, i), s = VLOAD(C_K, cs, hr + i);
    const floatv x1 = VLOAD(A_K, x, i), x2 = VLOAD(A_K, x, i + hr);
    VSTORE(A_K, x, i, x1 * c - x2 * s);
    VSTORE(A_K, x, i + hr, x2 * c + x1 * s);
  }
#endif
  for (; i < hr; ++i) rotate(x, hr, i, LOAD(C_K, cs, i), LOAD(C_K, cs, hr + i));
}
