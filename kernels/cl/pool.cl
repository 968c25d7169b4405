// SPDX-License-Identifier: Apache-2.0
// pool.cl: masked_mean, out[b, d] = sum_t m[b, t] * x[b, t, d] / max(sum_t m[b, t], eps) (the
// sentence-embedding mean pooling). x: [B, T, D] and m: [B, T] with any strides (elements), out:
// [B, D] contiguous. One work-item per (b, d): neighbouring work-items read neighbouring d, the
// loop over t streams the batch's rows; the mask sum is recomputed per work-item (T loads from
// cache). Defines: A_K (x/out kind), M_K (mask kind: b8, i32, i64 or a float kind), HAS_MASK.
__kernel void masked_mean(long B, long T, long D, __global const STYPE(A_K)* x, long x_off, long sxb, long sxt,
                          long sxd, __global const STYPE(M_K)* m, long m_off, long smb, long smt,
                          __global STYPE(A_K)* o, long o_off, float eps) {
  const long gid = get_global_id(0);
  if (gid >= B * D) return;
  const long b = gid / D, d = gid - b * D;
  x += x_off + b * sxb + d * sxd;
  m += m_off + b * smb;
  float acc = 0.0f, count = 0.0f;
  for (long t = 0; t < T; ++t) {
#if HAS_MASK
    const float w = LOAD(M_K, m, t * smt);
    if (w != 0.0f) acc += w * LOAD(A_K, x, t * sxt);  // a masked-out NaN/inf row stays out
    count += w;
#else
    acc += LOAD(A_K, x, t * sxt);
    count += 1.0f;
#endif
  }
  STORE(A_K, o, o_off + gid, acc / fmax(count, eps));
}
