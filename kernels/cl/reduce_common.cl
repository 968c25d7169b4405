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

// Vector forms for the row-per-work-item kernels (variant 1): NaN-propagating max/min on floatv
// and horizontal folds of a floatv.
#ifdef VEC
inline floatv nan_maxv(floatv a, floatv b) { return select(b, a, isnan(a) | (a >= b)); }
inline floatv nan_minv(floatv a, floatv b) { return select(b, a, isnan(a) | (a <= b)); }
inline float hsum(floatv v) {
#if VEC == 1
  return v;
#else
  float s = 0.0f;
  for (int k = 0; k < VEC; ++k) s += ((float*)&v)[k];
  return s;
#endif
}
inline float hmax(floatv v) {
#if VEC == 1
  return v;
#else
  float s = -INFINITY;
  for (int k = 0; k < VEC; ++k) s = nan_max(s, ((float*)&v)[k]);
  return s;
#endif
}
inline float hmin(floatv v) {
#if VEC == 1
  return v;
#else
  float s = INFINITY;
  for (int k = 0; k < VEC; ++k) s = nan_min(s, ((float*)&v)[k]);
  return s;
#endif
}
#endif
