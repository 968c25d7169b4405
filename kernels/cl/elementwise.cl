// SPDX-License-Identifier: Apache-2.0
// elementwise.cl: unary, binary and gated ops, f32 compute on every float storage kind.
// Defines: OP_<name>, A_K/B_K/O_K storage kinds, VEC, EPT, A_MODE (1 tensor, 2 one broadcast
// element), B_MODE (0 none, 1 tensor, 2 one broadcast element, 3 the `scalar` argument).
// Flat path (every operand contiguous): work-group b owns VEC-wide chunks [b*L*EPT, (b+1)*L*EPT);
// on step k work-item l takes chunk b*L*EPT + k*L + l (consecutive work-items on consecutive
// chunks: coalesced on GPUs, vectorised across work-items on CPUs); the n % VEC tail goes to the
// first work-items.
// Strided path: element index -> per-operand offsets over the dims the host merged (<= 8).
#ifndef B_K
#define B_K A_K
#endif
#ifndef A_MODE
#define A_MODE 1
#endif
#ifndef B_MODE
#define B_MODE 0
#endif

// erf for the gelu forms: Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), vectorisable, unlike
// the libm-style builtin on CPUs; gelu's tolerance carries an absolute |x|-scaled term for it.
#define PRISM_DEF_ERF(T, NAME, EXPF)                                                                  \
  inline T NAME(T x) {                                                                                \
    const T ax = fabs(x);                                                                             \
    const T t = (T)(1.0f) / ((T)(1.0f) + (T)(0.3275911f) * ax);                                       \
    const T p = t * ((T)(0.254829592f) +                                                              \
                     t * ((T)(-0.284496736f) + t * ((T)(1.421413741f) + t * ((T)(-1.453152027f) + t * (T)(1.061405429f))))); \
    return copysign((T)(1.0f) - p * EXPF(-ax * ax), x);                                                  \
  }
// 16-bit outputs on CPUs take the cheaper exp of prelude.cl (prism_exp16): ample for their
// precision. GPUs keep the builtin (hardware exp2; the polynomial slowed softmax f16 on the H100).
#define EXP_V PRISM_EXPV(O_K)
#define EXP_S PRISM_EXPS(O_K)
// erf's e^(-x^2) <= 1 takes the one-factor f32 exp on CPUs for f32 outputs too (prism_exp1f).
#if PRISM_CPU
#define erf_expv_f32 prism_exp1fv
#define erf_exps_f32 prism_exp1f
#else
#define erf_expv_f32 exp
#define erf_exps_f32 exp
#endif
#define erf_expv_f16 prism_expv_f16
#define erf_exps_f16 prism_exps_f16
#define erf_expv_bf16 prism_expv_bf16
#define erf_exps_bf16 prism_exps_bf16
#define ERF_EXP_V PRISM_XCAT(erf_expv_, O_K)
#define ERF_EXP_S PRISM_XCAT(erf_exps_, O_K)
#ifdef VEC
PRISM_DEF_ERF(floatv, prism_erf_v, ERF_EXP_V)
#endif
PRISM_DEF_ERF(float, prism_erf_s, ERF_EXP_S)

#if defined(OP_neg)
#define EW_BODY return -x;
#elif defined(OP_abs)
#define EW_BODY return fabs(x);
#elif defined(OP_exp)
#define EW_BODY return EXP(x);
#elif defined(OP_log)
#define EW_BODY return log(x);
#elif defined(OP_sqrt)
#define EW_BODY return sqrt(x);
#elif defined(OP_rsqrt)
#define EW_BODY return rsqrt(x);
#elif defined(OP_sin)
#define EW_BODY return sin(x);
#elif defined(OP_cos)
#define EW_BODY return cos(x);
#elif defined(OP_tanh)
#define EW_BODY return tanh(x);
#elif defined(OP_sigmoid)
#define EW_BODY return SIGMOID(x);
#elif defined(OP_relu)
#define EW_BODY return select(x, (T)(0.0f), x < (T)(0.0f));
#elif defined(OP_gelu)
#define EW_BODY return (T)(0.5f) * x * ((T)(1.0f) + ERF(x * (T)(0.70710678118654752f)));
#elif defined(OP_gelu_tanh)
#define EW_BODY \
  return (T)(0.5f) * x * ((T)(1.0f) + tanh((T)(0.79788456080286536f) * (x + (T)(0.044715f) * x * x * x)));
#elif defined(OP_silu)
#define EW_BODY return x * SIGMOID(x);
#elif defined(OP_add)
#define EW_BODY return x + (T)(alpha) * y;
#elif defined(OP_sub)
#define EW_BODY return x - (T)(alpha) * y;
#elif defined(OP_mul)
#define EW_BODY return x * y;
#elif defined(OP_div)
#define EW_BODY return x / y;
#elif defined(OP_maximum)
#define EW_BODY return select(fmax(x, y), x + y, isnan(x) | isnan(y));
#elif defined(OP_minimum)
#define EW_BODY return select(fmin(x, y), x + y, isnan(x) | isnan(y));
#elif defined(OP_pow)
#define EW_BODY return pow(x, y);
#elif defined(OP_silu_mul)
#define EW_BODY return x * SIGMOID(x) * y;
#elif defined(OP_gelu_mul)
#define EW_BODY return (T)(0.5f) * x * ((T)(1.0f) + ERF(x * (T)(0.70710678118654752f))) * y;
#elif defined(OP_gelu_tanh_mul)
#define EW_BODY \
  return (T)(0.5f) * x * ((T)(1.0f) + tanh((T)(0.79788456080286536f) * (x + (T)(0.044715f) * x * x * x))) * y;
#else
#error "elementwise.cl: no OP_<name> defined"
#endif

// sigmoid through e = exp(-|x|) <= 1: 1/(1+e) for x >= 0, e/(1+e) below, so results down to
// the smallest denormal survive (1/(1 + exp(-x)) is 0 once exp(-x) overflows, x < -88.7).
#define PRISM_SIGMOID_BODY(T, EXPF)                              \
  {                                                             \
    const T e = EXPF(-fabs(x));                                 \
    const T r = (T)(1.0f) / ((T)(1.0f) + e);                    \
    return select(e * r, r, x >= (T)(0.0f));                    \
  }
inline floatv sigmoid_v(floatv x) PRISM_SIGMOID_BODY(floatv, EXP_V)
inline float sigmoid_s(float x) PRISM_SIGMOID_BODY(float, EXP_S)

#define T floatv
#define ERF prism_erf_v
#define SIGMOID sigmoid_v
#define EXP EXP_V
inline floatv ew_v(floatv x, floatv y, float alpha) { EW_BODY }
#undef T
#undef ERF
#undef EXP
#undef SIGMOID
#define T float
#define ERF prism_erf_s
#define SIGMOID sigmoid_s
#define EXP EXP_S
inline float ew_s(float x, float y, float alpha) { EW_BODY }
#undef T
#undef ERF
#undef EXP
#undef SIGMOID

__kernel void ew_flat(long n, __global const STYPE(A_K)* a, long a_off, __global const STYPE(B_K)* b, long b_off,
                      __global STYPE(O_K)* o, long o_off, float alpha, float scalar) {
  a += a_off;
  b += b_off;
  o += o_off;
  const long nv = n / VEC;
  const long g = get_global_id(0), L = get_local_size(0);
  // Each work-group owns a contiguous block of L * EPT chunks; within it, consecutive work-items
  // take consecutive chunks on each step (coalesced on GPUs, one streaming region per CPU thread).
  const long base = get_group_id(0) * L * EPT + get_local_id(0);
#if A_MODE == 2
  const float as = LOAD(A_K, a, 0);
#endif
#if B_MODE == 2
  const float bs = LOAD(B_K, b, 0);
#elif B_MODE == 3
  const float bs = scalar;
#endif
  for (int k = 0; k < EPT; ++k) {
    const long v = base + (long)k * L;
    if (v < nv) {
#if A_MODE == 2
      floatv x = (floatv)(as);
#else
      floatv x = VLOAD(A_K, a, v * VEC);
#endif
#if B_MODE == 1
      floatv y = VLOAD(B_K, b, v * VEC);
#elif B_MODE == 0
      floatv y = x;
#else
      floatv y = (floatv)(bs);
#endif
      VSTORE(O_K, o, v * VEC, ew_v(x, y, alpha));
    }
  }
  const long t = nv * VEC + g;
  if (t < n) {
#if A_MODE == 2
    float x = as;
#else
    float x = LOAD(A_K, a, t);
#endif
#if B_MODE == 1
    float y = LOAD(B_K, b, t);
#elif B_MODE == 0
    float y = x;
#else
    float y = bs;
#endif
    STORE(O_K, o, t, ew_s(x, y, alpha));
  }
}

__kernel void ew_strided(long n, int nd, long8 shape, __global const STYPE(A_K)* a, long a_off, long8 sa,
                         __global const STYPE(B_K)* b, long b_off, long8 sb, __global STYPE(O_K)* o, long o_off,
                         long8 so, float alpha, float scalar) {
  long sh[8], s_a[8], s_b[8], s_o[8];
  vstore8(shape, 0, sh);
  vstore8(sa, 0, s_a);
  vstore8(sb, 0, s_b);
  vstore8(so, 0, s_o);
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) {
    long idx = i, oa = a_off, ob = b_off, oo = o_off;
    for (int d = nd - 1; d >= 0; --d) {
      const long c = idx % sh[d];
      idx /= sh[d];
      oa += c * s_a[d];
      ob += c * s_b[d];
      oo += c * s_o[d];
    }
    const float x = LOAD(A_K, a, oa);
#if B_MODE == 1 || B_MODE == 2
    const float y = LOAD(B_K, b, ob);
#elif B_MODE == 3
    const float y = scalar;
#else
    const float y = x;
#endif
    STORE(O_K, o, oo, ew_s(x, y, alpha));
  }
}

// Rows path: [rows, cols] with unit inner stride for every operand and free row strides (0 =
// broadcast over rows, e.g. a bias; the halves of a gated input). Work-item (x, row) handles the
// VEC-wide chunk x of its row; the cols % VEC tail goes to the first work-items of the row.
__kernel void ew_rows(long cols, __global const STYPE(A_K)* a, long a_off, long a_rs, __global const STYPE(B_K)* b,
                      long b_off, long b_rs, __global STYPE(O_K)* o, long o_off, long o_rs, float alpha, float scalar) {
  const long row = get_global_id(1), x = get_global_id(0);
  a += a_off + row * a_rs;
  b += b_off + row * b_rs;
  o += o_off + row * o_rs;
  const long nv = cols / VEC;
  if (x < nv) {
    floatv xa = VLOAD(A_K, a, x * VEC);
#if B_MODE == 1 || B_MODE == 2
    floatv y = VLOAD(B_K, b, x * VEC);
#elif B_MODE == 3
    floatv y = (floatv)(scalar);
#else
    floatv y = xa;
#endif
    VSTORE(O_K, o, x * VEC, ew_v(xa, y, alpha));
  }
  const long t = nv * VEC + x;
  if (t < cols) {
    const float xs = LOAD(A_K, a, t);
#if B_MODE == 1 || B_MODE == 2
    const float ys = LOAD(B_K, b, t);
#elif B_MODE == 3
    const float ys = scalar;
#else
    const float ys = xs;
#endif
    STORE(O_K, o, t, ew_s(xs, ys, alpha));
  }
}
