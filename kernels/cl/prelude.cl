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

#define PRISM_DEF_VEC(N)                                                                              \
  inline float##N prism_vload##N##_f32(const __global float* p, long i) { return vload##N(0, p + i); }     \
  inline float##N prism_vload##N##_f16(const __global half* p, long i) { return vload_half##N(0, p + i); } \
  inline float##N prism_vload##N##_bf16(const __global ushort* p, long i) {                                \
    return as_float##N(convert_uint##N(vload##N(0, p + i)) << 16);                                   \
  }                                                                                                  \
  inline void prism_vstore##N##_f32(__global float* p, long i, float##N v) { vstore##N(v, 0, p + i); }     \
  inline void prism_vstore##N##_f16(__global half* p, long i, float##N v) { vstore_half##N##_rte(v, 0, p + i); } \
  inline void prism_vstore##N##_bf16(__global ushort* p, long i, float##N v) {                             \
    uint##N x = as_uint##N(v);                                                                       \
    uint##N r = (x + (uint##N)(0x7fffu) + ((x >> 16) & (uint##N)(1u))) >> 16;                        \
    r = select(r, (x >> 16) | (uint##N)(0x40u), (x & (uint##N)(0x7fffffffu)) > (uint##N)(0x7f800000u)); \
    vstore##N(convert_ushort##N(r), 0, p + i);                                                       \
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
