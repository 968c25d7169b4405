// SPDX-License-Identifier: Apache-2.0
// prelude.cl: prepended to every prism program. Storage kinds K in {f32, f16, bf16, i32, i64, b8}:
// STYPE(K) is the storage type, LOAD(K, p, i) / STORE(K, p, i, v) read/write element i as float
// (f16 through core vload_half/vstore_half_rte, no cl_khr_fp16; bf16 as ushort with RNE), and
// with VEC defined, floatv / VLOAD / VSTORE move VEC consecutive elements of float kinds.
#define PRISM_CAT(a, b) a##b
#define PRISM_XCAT(a, b) PRISM_CAT(a, b)

#define stype_f32 float
#define stype_f16 half
#define stype_bf16 ushort
#define stype_i32 int
#define stype_i64 long
#define stype_b8 uchar
#define STYPE(K) PRISM_XCAT(stype_, K)

inline float bf16_to_f(ushort b) { return as_float((uint)b << 16); }
// Eight bf16 values packed in 16 bytes (little-endian: element 2i is the low half) as floats.
inline float8 prism_bf16x8(uint4 u) {
  return (float8)(as_float(u.s0 << 16), as_float(u.s0 & 0xffff0000u), as_float(u.s1 << 16),
                  as_float(u.s1 & 0xffff0000u), as_float(u.s2 << 16), as_float(u.s2 & 0xffff0000u),
                  as_float(u.s3 << 16), as_float(u.s3 & 0xffff0000u));
}
inline ushort f_to_bf16(float f) {
  uint x = as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (ushort)(x >> 16);
}

inline float load_f32(const __global float* p, long i) { return p[i]; }
inline float load_f16(const __global half* p, long i) { return vload_half(0, p + i); }
inline float load_bf16(const __global ushort* p, long i) { return bf16_to_f(p[i]); }
inline float load_i32(const __global int* p, long i) { return (float)p[i]; }
inline float load_i64(const __global long* p, long i) { return (float)p[i]; }
inline float load_b8(const __global uchar* p, long i) { return p[i] ? 1.0f : 0.0f; }
inline void store_f32(__global float* p, long i, float v) { p[i] = v; }
inline void store_f16(__global half* p, long i, float v) { vstore_half_rte(v, 0, p + i); }
inline void store_bf16(__global ushort* p, long i, float v) { p[i] = f_to_bf16(v); }
inline void store_i32(__global int* p, long i, float v) { p[i] = convert_int_sat_rtz(v); }
inline void store_i64(__global long* p, long i, float v) { p[i] = convert_long_sat_rtz(v); }
inline void store_b8(__global uchar* p, long i, float v) { p[i] = v != 0.0f ? 1 : 0; }
#define LOAD(K, p, i) PRISM_XCAT(load_, K)(p, i)
#define STORE(K, p, i, v) PRISM_XCAT(store_, K)(p, i, v)

// Exact integer paths (casts between integer kinds must not go through float).
inline long loadl_i32(const __global int* p, long i) { return p[i]; }
inline long loadl_i64(const __global long* p, long i) { return p[i]; }
inline long loadl_b8(const __global uchar* p, long i) { return p[i] ? 1 : 0; }
inline void storel_i32(__global int* p, long i, long v) { p[i] = (int)v; }
inline void storel_i64(__global long* p, long i, long v) { p[i] = v; }
inline void storel_b8(__global uchar* p, long i, long v) { p[i] = v != 0 ? 1 : 0; }
inline void storel_f32(__global float* p, long i, long v) { p[i] = convert_float(v); }
inline void storel_f16(__global half* p, long i, long v) { vstore_half_rte(convert_float(v), 0, p + i); }
inline void storel_bf16(__global ushort* p, long i, long v) { p[i] = f_to_bf16(convert_float(v)); }
#define LOADL(K, p, i) PRISM_XCAT(loadl_, K)(p, i)
#define STOREL(K, p, i, v) PRISM_XCAT(storel_, K)(p, i, v)

// Vectors are stored through element-aligned vector types on CPUs: PoCL's vstoreN writes a
// ushort16 element by element (16 scalar stores; bf16 exp ran at 0.3x copy) and a float16 as
// three pieces (16 + 16 + 32 bytes), while a plain store of an under-aligned vector type
// compiles to one unaligned vector store. GPUs keep the driver's own vstore.
typedef ushort2 __attribute__((aligned(2))) prism_ushort2_u;
typedef ushort4 __attribute__((aligned(2))) prism_ushort4_u;
typedef ushort8 __attribute__((aligned(2))) prism_ushort8_u;
typedef ushort16 __attribute__((aligned(2))) prism_ushort16_u;
typedef float2 __attribute__((aligned(4))) prism_float2_u;
typedef float4 __attribute__((aligned(4))) prism_float4_u;
typedef float8 __attribute__((aligned(4))) prism_float8_u;
typedef float16 __attribute__((aligned(4))) prism_float16_u;
// Loads of f16 vectors likewise: PoCL 3.1's vload_half16 reads its upper half with an aligned
// vmovdqa, which faults on a row that starts at an odd element (seen in argmax over [7, 1031]
// f16, 2026-11-25); the halves are read unaligned into private memory, aligned there, and
// converted from it.
#if PRISM_CPU
#define PRISM_STORE_U16V(N, q, v) (*(__global prism_ushort##N##_u*)(q) = (v))
#define PRISM_STORE_F32V(N, q, v) (*(__global prism_float##N##_u*)(q) = (v))
#define PRISM_LOAD_F16V(N, q)                                              \
  ({                                                                       \
    const ushort##N prism_bits = *(const __global prism_ushort##N##_u*)(q); \
    vload_half##N(0, (const __private half*)&prism_bits);                  \
  })
#else
#define PRISM_LOAD_F16V(N, q) vload_half##N(0, q)
#define PRISM_STORE_U16V(N, q, v) vstore##N(v, 0, q)
#define PRISM_STORE_F32V(N, q, v) vstore##N(v, 0, q)
#endif
#define PRISM_DEF_VEC(N)                                                                              \
  inline float##N prism_vload##N##_f32(const __global float* p, long i) { return vload##N(0, p + i); }     \
  inline float##N prism_vload##N##_f16(const __global half* p, long i) { return PRISM_LOAD_F16V(N, p + i); } \
  inline float##N prism_vload##N##_bf16(const __global ushort* p, long i) {                                \
    return as_float##N(convert_uint##N(vload##N(0, p + i)) << 16);                                   \
  }                                                                                                  \
  inline void prism_vstore##N##_f32(__global float* p, long i, float##N v) { PRISM_STORE_F32V(N, p + i, v); } \
  inline void prism_vstore##N##_f16(__global half* p, long i, float##N v) { vstore_half##N##_rte(v, 0, p + i); } \
  /* f32 -> bf16 bits, round to nearest even, NaN kept quiet (the vector f_to_bf16) */                 \
  inline ushort##N prism_bf16_bits##N(float##N v) {                                                  \
    uint##N x = as_uint##N(v);                                                                       \
    uint##N r = (x + (uint##N)(0x7fffu) + ((x >> 16) & (uint##N)(1u))) >> 16;                        \
    r = select(r, (x >> 16) | (uint##N)(0x40u), (x & (uint##N)(0x7fffffffu)) > (uint##N)(0x7f800000u)); \
    return convert_ushort##N(r);                                                                     \
  }                                                                                                  \
  inline void prism_vstore##N##_bf16(__global ushort* p, long i, float##N v) {                             \
    PRISM_STORE_U16V(N, p + i, prism_bf16_bits##N(v));                                               \
  }
PRISM_DEF_VEC(2)
PRISM_DEF_VEC(4)
PRISM_DEF_VEC(8)
PRISM_DEF_VEC(16)

#ifdef VEC
#if VEC == 1
typedef float floatv;
#define VLOAD(K, p, i) LOAD(K, p, i)
#define VSTORE(K, p, i, v) STORE(K, p, i, v)
#else
typedef PRISM_XCAT(float, VEC) floatv;
#define VLOAD(K, p, i) PRISM_XCAT(PRISM_XCAT(prism_vload, VEC), PRISM_XCAT(_, K))(p, i)
#define VSTORE(K, p, i, v) PRISM_XCAT(PRISM_XCAT(prism_vstore, VEC), PRISM_XCAT(_, K))(p, i, v)
#endif
#endif

// Streaming stores (CPU row kernels compiled with NT=1; clang's __builtin_nontemporal_store):
// the vector must be aligned to its size, so a kernel checks each row pointer once
// (nt_aligned) and stores normally otherwise; the stores are weakly ordered, so nt_fence() (a
// seq_cst fence, mfence on x86) ends every row that used them. reduce_common.cl's VSTORE_NT
// and embedding.cl's row copy build on these.
#if NT && defined(VEC) && VEC > 1
#define nt_aligned(p) ((((ulong)(p)) & (VEC * sizeof(*(p)) - 1)) == 0)
#define nt_fence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#else
#define nt_aligned(p) false
#define nt_fence() ((void)0)
#endif

// prism_exp16 / prism_exp16v (floatv): e^x for results stored as bf16; prism_exp16h /
// prism_exp16hv: the same for f16 results. Kernels use them on CPUs only (PRISM_CPU, set by
// build_kernel): GPUs have a hardware exp2. On a 2-core CPU the 16-bit exp ops are bound by
// instruction count, not memory, so each form is as short as its storage type allows.
// t = x log2(e) is split as n + f, |f| <= 1/2, by the round-to-nearest trick (t + 1.5 * 2^23,
// plus the exponent bias, so the low bits of tm are the biased exponent); 2^f is a minimax
// polynomial. Clamps are written as selects so that a NaN x passes through (an fmax would turn
// it into the bound).
// - f16 (exp16h): degree 4 (relative error 2^-18.3); t clamped to [-127, 127] and one
//   power-of-two factor, whose biased exponent 0 at t < -126.5 makes the result exactly 0 (so
//   e^-inf = 0 inside softmax, where the value is not rounded to f16 first). Exact after
//   rounding to f16: e^x below 2^-126 or above 2^127 is 0 or inf in f16 either way.
// - bf16 (exp16): degree 3 (2^-13.6); t clamped to [-151, 128] and two power-of-two factors,
//   so results that are bf16 denormals and results that overflow come out right.
// Checked against double over every float on the host (at most 1 ulp of the storage type from
// the correctly rounded result: a full ulp only for values next to a rounding midpoint, and for
// 1 (f16) and 10 (bf16) floats just past the overflow threshold, which give the largest finite
// value instead of inf). tests/ops/exp16.cpp checks the device results over the full range.
#define PRISM_EXP2_POLY4(T, f)                                                                      \
  fma(fma(fma(fma((T)(9.570102207e-03f), f, (T)(5.591786280e-02f)), f, (T)(2.402474433e-01f)), f, \
          (T)(6.931217909e-01f)),                                                                   \
      f, (T)(9.999992847e-01f))
#define PRISM_EXP2_POLY3(T, f)                                                                      \
  fma(fma(fma((T)(5.517166853e-02f), f, (T)(2.426111400e-01f)), f, (T)(6.932609677e-01f)), f,     \
      (T)(9.999280572e-01f))
#define PRISM_DEF_EXP16(T, IT, AS_T, AS_IT, NAME)                                                   \
  inline T NAME(T x) {                                                                              \
    T t = x * (T)(1.44269504088896341f);                                                            \
    t = select(t, (T)(-151.0f), t < (T)(-151.0f));                                                  \
    t = select(t, (T)(128.0f), t > (T)(128.0f));                                                    \
    const T tm = t + (T)(12583166.0f); /* 1.5 * 2^23 + 2 * 127: low bits n + 254 */                \
    const T f = t - (tm - (T)(12583166.0f));                                                        \
    const T p = PRISM_EXP2_POLY3(T, f);                                                             \
    const IT e = AS_IT(tm) & (IT)(0x1ff);                                                           \
    const IT a = e >> 1;                                                                            \
    return p * AS_T(a << 23) * AS_T((e - a) << 23);                                                 \
  }
// One power-of-two factor (f16's exp and prism_exp1f below), with a 2^f polynomial POLY.
#define PRISM_DEF_EXP_1FACTOR(T, IT, AS_T, AS_IT, NAME, POLY)                                       \
  inline T NAME(T x) {                                                                              \
    T t = x * (T)(1.44269504088896341f);                                                            \
    t = select(t, (T)(-127.0f), t < (T)(-127.0f));                                                  \
    t = select(t, (T)(127.0f), t > (T)(127.0f));                                                    \
    const T tm = t + (T)(12583039.0f); /* 1.5 * 2^23 + 127: low bits n + 127 */                     \
    const T f = t - (tm - (T)(12583039.0f));                                                        \
    return POLY(T, f) * AS_T(AS_IT(tm) << 23);                                                      \
  }
#define PRISM_DEF_EXP16H(T, IT, AS_T, AS_IT, NAME) PRISM_DEF_EXP_1FACTOR(T, IT, AS_T, AS_IT, NAME, PRISM_EXP2_POLY4)
// prism_exp1f / prism_exp1fv: e^x for f32 results that are consumed inside a formula which
// never needs them outside [2^-126, 2^127]: the f16 form with the degree-5 polynomial (relative
// error 2^-22.2 in f32 arithmetic) and the same clamps, so smaller results are 0 or ~2^-126 and
// NaN passes through. gelu's erf uses it on CPUs for e^(-x^2) <= 1, next to the erf
// approximation's own 1.5e-7 absolute error; it is half the instructions of the builtin, which
// keeps f32 denormal results and overflow.
#define PRISM_EXP2_POLY5(T, f)                                                                      \
  fma(fma(fma(fma(fma((T)(1.327647245e-03f), f, (T)(9.675541893e-03f)), f, (T)(5.550713092e-02f)), f, \
              (T)(2.402212024e-01f)),                                                               \
          f, (T)(6.931469440e-01f)),                                                                \
      f, (T)(1.000000119e+00f))
#define PRISM_DEF_EXP1F(T, IT, AS_T, AS_IT, NAME) PRISM_DEF_EXP_1FACTOR(T, IT, AS_T, AS_IT, NAME, PRISM_EXP2_POLY5)
PRISM_DEF_EXP1F(float, int, as_float, as_int, prism_exp1f)
// prism_expn / prism_expnv: e^x for x <= 0 (softmax's x - max) with the accuracy of an f32
// exp: at most 1.05 ulp from the correctly rounded result over every float in [-104, 0],
// denormal results included (checked against double on the host). Cody-Waite reduction
// (ln 2 in two parts), a degree-6 polynomial for e^r, and because n <= 0 one power-of-two
// factor 2^(n + 63) (normal for every n >= -150) followed by an exact-until-the-last-rounding
// 2^-63. About two thirds of the builtin's instructions, which must also cover overflow.
// NaN passes through; x > 44 is outside its domain.
#define PRISM_DEF_EXPN(T, IT, AS_T, AS_IT, NAME)                                                    \
  inline T NAME(T x) {                                                                              \
    x = select(x, (T)(-104.0f), x < (T)(-104.0f));                                                  \
    const T tm = fma(x, (T)(1.44269504088896341f), (T)(12583102.0f)); /* 1.5 * 2^23 + 127 + 63 */   \
    const T n = tm - (T)(12583102.0f);                                                              \
    T r = fma(n, (T)(-0.693145751953125f), x);                                                      \
    r = fma(n, (T)(-1.428606765330187e-06f), r);                                                    \
    const T p = fma(fma(fma(fma(fma(fma((T)(1.383684576e-03f), r, (T)(8.374815807e-03f)), r,        \
                                    (T)(4.166822508e-02f)),                                         \
                                r, (T)(1.666641980e-01f)),                                          \
                            r, (T)(4.999999106e-01f)),                                              \
                        r, (T)(1.0f)),                                                              \
                    r, (T)(1.0f));                                                                  \
    return p * AS_T(AS_IT(tm) << 23) * (T)(1.0842021724855044e-19f); /* 2^-63 */                   \
  }
PRISM_DEF_EXPN(float, int, as_float, as_int, prism_expn)
PRISM_DEF_EXP16(float, int, as_float, as_int, prism_exp16)
PRISM_DEF_EXP16H(float, int, as_float, as_int, prism_exp16h)
#if defined(VEC) && VEC > 1
PRISM_DEF_EXP16(floatv, PRISM_XCAT(int, VEC), PRISM_XCAT(as_float, VEC), PRISM_XCAT(as_int, VEC), prism_exp16v)
PRISM_DEF_EXP16H(floatv, PRISM_XCAT(int, VEC), PRISM_XCAT(as_float, VEC), PRISM_XCAT(as_int, VEC), prism_exp16hv)
PRISM_DEF_EXP1F(floatv, PRISM_XCAT(int, VEC), PRISM_XCAT(as_float, VEC), PRISM_XCAT(as_int, VEC), prism_exp1fv)
PRISM_DEF_EXPN(floatv, PRISM_XCAT(int, VEC), PRISM_XCAT(as_float, VEC), PRISM_XCAT(as_int, VEC), prism_expnv)
#elif defined(VEC)
#define prism_exp1fv prism_exp1f
#define prism_expnv prism_expn
#define prism_exp16v prism_exp16
#define prism_exp16hv prism_exp16h
#endif

// PRISM_EXPV(K) / PRISM_EXPS(K): the exp (floatv / float) for results stored as kind K: on CPUs
// the cheaper ones above for f16 and bf16, else the builtin (GPUs have a hardware exp2).
#if PRISM_CPU
#define prism_expv_f16 prism_exp16hv
#define prism_exps_f16 prism_exp16h
#define prism_expv_bf16 prism_exp16v
#define prism_exps_bf16 prism_exp16
#else
#define prism_expv_f16 exp
#define prism_exps_f16 exp
#define prism_expv_bf16 exp
#define prism_exps_bf16 exp
#endif
#define prism_expv_f32 exp
#define prism_exps_f32 exp
#define PRISM_EXPV(K) PRISM_XCAT(prism_expv_, K)
#define PRISM_EXPS(K) PRISM_XCAT(prism_exps_, K)

// Offset of row-major element `idx` of an nd iteration space (dims merged on the host).
inline long nd_offset(long idx, int nd, const long* shape, const long* strides) {
  long off = 0;
  for (int d = nd - 1; d >= 0; --d) {
    long c = idx % shape[d];
    idx /= shape[d];
    off += c * strides[d];
  }
  return off;
}
