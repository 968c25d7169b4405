// SPDX-License-Identifier: Apache-2.0
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
// The plain max of v's lanes (fmax: for vectors without NaN), as a tree of vector fmax.
inline float vmax(floatv v) {
#if VEC == 1
  return v;
#else
#if VEC == 16
  const float8 a = fmax(v.lo, v.hi);
  const float4 b = fmax(a.lo, a.hi);
#elif VEC == 8
  const float4 b = fmax(v.lo, v.hi);
#elif VEC == 4
  const float4 b = v;
#endif
#if VEC == 2
  return fmax(v.x, v.y);
#else
  const float2 c = fmax(b.lo, b.hi);
  return fmax(c.x, c.y);
#endif
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

// Streaming stores for the CPU row kernels (variant 2, compiled with NT=1 for PoCL only): the
// output is not read again, so a non-temporal store skips the read-for-ownership of each line
// (a third of the traffic of a row op). VSTORE_NT(K, p, i, v, nt) stores element kind K; `nt`
// is the row's nt_aligned (prelude.cl, with nt_fence).
#if NT && defined(VEC) && VEC > 1
typedef PRISM_XCAT(ushort, VEC) ushortv;
inline void prism_vstore_nt_f32(__global float* p, long i, floatv v) {
  __builtin_nontemporal_store(v, (__global floatv*)(p + i));
}
inline void prism_vstore_nt_bf16(__global ushort* p, long i, floatv v) {
  __builtin_nontemporal_store(PRISM_XCAT(prism_bf16_bits, VEC)(v), (__global ushortv*)(p + i));
}
// f16 keeps ordinary stores: the private vstore_half round trip this needs crashed PoCL 5.0
// (segfault in fused_add_rms_norm f16 with streaming stores on the GPU machine's CPU device,
// 2026-11-22), and 16-bit rows gain least from skipping the read-for-ownership.
inline void prism_vstore_nt_f16(__global half* p, long i, floatv v) { VSTORE(f16, p, i, v); }
#define VSTORE_NT(K, p, i, v, nt)                                        \
  do {                                                                   \
    if (nt)                                                              \
      PRISM_XCAT(prism_vstore_nt_, K)(p, i, v);                          \
    else                                                                 \
      VSTORE(K, p, i, v);                                                \
  } while (0)
#else
#define VSTORE_NT(K, p, i, v, nt) VSTORE(K, p, i, v)
#endif
