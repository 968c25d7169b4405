// reduce_common.cl: work-group tree reductions over __local arrays of WG floats (WG a power of
// two), used by the row kernels of reduce.cl, softmax.cl and norm.cl.
inline float wg_sum(__local float* s, float v) {
  const int lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = WG / 2; w > 0; w >>= 1) {
    if (lid < w) s[lid] += s[lid + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// max that propagates NaN (PyTorch semantics)
inline float nan_max(float a, float b) { return (isnan(a) || a >= b) ? a : b; }
inline float nan_min(float a, float b) { return (isnan(a) || a <= b) ? a : b; }

inline float wg_max(__local float* s, float v) {
  const int lid = get_local_id(0);
  s[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = WG / 2; w > 0; w >>= 1) {
    if (lid < w) s[lid] = nan_max(s[lid], s[lid + w]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = s[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
