// SPDX-License-Identifier: Apache-2.0
// Shared prelude of prism's GEMM and attention kernels: storage-dtype loads/stores (f32, f16 via
// core vload_half/vstore_half, bf16 as 16-bit with round-to-nearest-even), vector helpers, epilogue.
// PRISM_DTYPE: 0 f32, 1 f16, 2 bf16. Compute is always f32.

#define GEMM_CAT_(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT_(a, b)

#ifndef VW
#define VW 1
#endif

#if PRISM_DTYPE == 0
typedef float GT;
#define PRISM_LOAD(p) (*(p))
#define PRISM_STORE(p, v) (*(p) = (v))
#if VW == 1
#define PRISM_LOADV(p) (*(p))
#else
#define PRISM_LOADV(p) GEMM_CAT(vload, VW)(0, (p))
#endif
#elif PRISM_DTYPE == 1
typedef half GT;
#define PRISM_LOAD(p) vload_half(0, (p))
#define PRISM_STORE(p, v) vstore_half_rte((v), 0, (p))
#if VW == 1
#define PRISM_LOADV(p) vload_half(0, (p))
#else
// prelude.cl's loader: on CPUs it avoids PoCL 3.1's vload_half16, which faults on rows that are
// not 32-byte aligned.
#define PRISM_LOADV(p) GEMM_CAT(GEMM_CAT(prism_vload, VW), _f16)((p), 0)
#endif
#elif PRISM_DTYPE == 2
typedef ushort GT;
#define PRISM_LOAD(p) as_float(((uint)(*(p))) << 16)
#define PRISM_STORE(p, v) (*(p) = prism_to_bf16(v))
#if VW == 1
#define PRISM_LOADV(p) as_float(((uint)(*(p))) << 16)
#else
#define PRISM_LOADV(p) GEMM_CAT(as_float, VW)(GEMM_CAT(convert_uint, VW)(GEMM_CAT(vload, VW)(0, (p))) << 16)
#endif
#else
#error "PRISM_DTYPE must be 0 (f32), 1 (f16) or 2 (bf16)"
#endif

// f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
inline ushort prism_to_bf16(float f) {
  const uint u = as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
  return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// 16 bytes of storage in one load, for GPU GEMVs whose rows are 16-byte aligned: V16 elements
// (4 f32, 8 f16/bf16) as a float vector VT16; prism_vdot16 sums their products in f32.
#if PRISM_DTYPE == 0
#define V16 4
typedef float4 VT16;
inline VT16 prism_load16(__global const GT* p) { return *(__global const float4*)p; }
inline float prism_vdot16(VT16 a, VT16 b) { return dot(a, b); }
#else
#define V16 8
typedef float8 VT16;
#if PRISM_DTYPE == 1
inline VT16 prism_load16(__global const GT* p) { return vload_half8(0, p); }
#else
// prism_bf16x8 (prelude.cl): eight packed bf16 values as floats.
inline VT16 prism_load16(__global const GT* p) { return prism_bf16x8(*(__global const uint4*)p); }
#endif
inline float prism_vdot16(VT16 a, VT16 b) { return dot(a.lo, b.lo) + dot(a.hi, b.hi); }
#endif

inline float prism_hsum1(float v) { return v; }
inline float prism_hsum2(float2 v) { return v.s0 + v.s1; }
inline float prism_hsum4(float4 v) { return prism_hsum2(v.lo + v.hi); }
inline float prism_hsum8(float8 v) { return prism_hsum4(v.lo + v.hi); }
inline float prism_hsum16(float16 v) { return prism_hsum8(v.lo + v.hi); }
#define prism_hsum GEMM_CAT(prism_hsum, VW)

// The store epilogue every GEMM kernel applies (gemm_cpu/gpu/gemv/nv/mma.cl and their split-K
// reductions): act(alpha * acc (+ beta * bias(m, n) when HAS_BIAS)). ACT: 0 none, 1 GELU (erf),
// 2 GELU (tanh approximation), 3 SiLU (linear's `activation` attribute).
#ifndef ACT
#define ACT 0
#endif
inline float prism_activation(float v) {
#if ACT == 1
  return 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
#elif ACT == 2
  return 0.5f * v * (1.0f + tanh(0.79788456080286536f * (v + 0.044715f * v * v * v)));
#elif ACT == 3
  return v / (1.0f + exp(-v));
#else
  return v;
#endif
}

// alpha * acc (+ beta * bias(m, n) when HAS_BIAS), before the activation.
inline float prism_bias_epilogue(float acc, float alpha, float beta, __global const GT* X, long x_off, int sxm,
                                 int sxn, int m, int n) {
#if HAS_BIAS
  return alpha * acc + beta * PRISM_LOAD(X + x_off + (long)m * sxm + (long)n * sxn);
#else
  return alpha * acc;
#endif
}

inline float prism_epilogue(float acc, float alpha, float beta, __global const GT* X, long x_off, int sxm,
                            int sxn, int m, int n) {
  return prism_activation(prism_bias_epilogue(acc, alpha, beta, X, x_off, sxm, sxn, m, n));
}
