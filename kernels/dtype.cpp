// SPDX-License-Identifier: Apache-2.0
// dtype names, sizes and the f16 / bf16 <-> f32 conversions (round-to-nearest-even, NaN kept).
#include "prism/dtype.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "prism/error.hpp"

namespace prism {

std::size_t dtype_size(dtype t) noexcept {
  switch (t) {
    case dtype::f32:
      return 4;
    case dtype::f16:
      return 2;
    case dtype::bf16:
      return 2;
    case dtype::i32:
      return 4;
    case dtype::i64:
      return 8;
    case dtype::boolean:
      return 1;
    case dtype::q8_0:
      return 34;  // f16 d, i8 q[32]
    case dtype::q4_0:
      return 18;  // f16 d, u8 q[16]
    case dtype::q4_1:
      return 20;  // f16 d, f16 m, u8 q[16]
  }
  return 0;
}

std::size_t dtype_block_elements(dtype t) noexcept {
  return is_quantized(t) ? 32 : 1;
}

std::size_t dtype_storage_bytes(dtype t, std::int64_t elements) noexcept {
  if (elements <= 0) return 0;
  const auto n = static_cast<std::size_t>(elements);
  const std::size_t block = dtype_block_elements(t);
  return (n + block - 1) / block * dtype_size(t);
}

const char* dtype_name(dtype t) noexcept {
  switch (t) {
    case dtype::f32:
      return "f32";
    case dtype::f16:
      return "f16";
    case dtype::bf16:
      return "bf16";
    case dtype::i32:
      return "i32";
    case dtype::i64:
      return "i64";
    case dtype::boolean:
      return "bool";
    case dtype::q8_0:
      return "q8_0";
    case dtype::q4_0:
      return "q4_0";
    case dtype::q4_1:
      return "q4_1";
  }
  return "?";
}

dtype parse_dtype(std::string_view name) {
  struct alias {
    std::string_view text;
    dtype t;
  };
  static constexpr alias aliases[] = {
      {"f32", dtype::f32},         {"float32", dtype::f32}, {"f16", dtype::f16},
      {"float16", dtype::f16},     {"half", dtype::f16},    {"bf16", dtype::bf16},
      {"bfloat16", dtype::bf16},   {"i32", dtype::i32},     {"int32", dtype::i32},
      {"i64", dtype::i64},         {"int64", dtype::i64},   {"bool", dtype::boolean},
      {"boolean", dtype::boolean}, {"q8_0", dtype::q8_0},   {"Q8_0", dtype::q8_0},
      {"q4_0", dtype::q4_0},       {"Q4_0", dtype::q4_0},   {"q4_1", dtype::q4_1},
      {"Q4_1", dtype::q4_1}};
  for (const auto& a : aliases)
    if (a.text == name) return a.t;
  throw error(errc::invalid_argument, "parse_dtype",
              "unknown dtype '" + std::string(name) +
                  "'; valid: f32, f16, bf16, i32, i64, bool, q8_0, q4_0, q4_1 (also float32, float16, "
                  "bfloat16, int32, int64)");
}

bool is_floating(dtype t) noexcept {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16;
}

bool is_quantized(dtype t) noexcept {
  return t == dtype::q8_0 || t == dtype::q4_0 || t == dtype::q4_1;
}

std::uint16_t float_to_half(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN: keep a quiet NaN's top payload bits
    if (abs == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // < 2^-25: rounds to 0
    const std::uint32_t e = abs >> 23;
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const std::uint32_t s = 126 - e;  // value = mant * 2^(e-150); half subnormal unit is 2^-24
    const std::uint32_t q = mant >> s;
    const std::uint32_t rem = mant & ((1u << s) - 1);
    const std::uint32_t half_ulp = 1u << (s - 1);
    std::uint32_t out = q;
    if (rem > half_ulp || (rem == half_ulp && (q & 1u))) ++out;
    return static_cast<std::uint16_t>(sign | out);
  }
  // Normal: rebias exponent, round 13 dropped bits to nearest even (carry may bump exponent).
  std::uint32_t h = ((abs - 0x38000000u) >> 13);
  const std::uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  std::uint32_t m = h & 0x3ffu;
  std::uint32_t x;
  if (e == 0x1f) {
    x = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    x = sign | ((e + 112) << 23) | (m << 13);
  } else if (m == 0) {
    x = sign;
  } else {  // subnormal: normalise
    int ex = -1;
    do {
      ++ex;
      m <<= 1;
    } while ((m & 0x400u) == 0);
    x = sign | static_cast<std::uint32_t>(112 - ex) << 23 | ((m & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(x);
}

std::uint16_t float_to_bf16(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

namespace {

// The scalar conversions above, rewritten without branches (every case computed, one chosen by
// selects) so that a loop of them vectorizes; tests/io check them against the scalar functions
// over every 16-bit pattern and the f32 edge cases. Elements travel as f32 bit patterns.

// c ? a : b as mask arithmetic: GCC keeps nested ?: as branches, which stops vectorization.
inline std::uint32_t select(bool c, std::uint32_t a, std::uint32_t b) {
  return b ^ ((a ^ b) & (0u - static_cast<std::uint32_t>(c)));
}

// f16 -> f32 bits, exact. Subnormals: the 10-bit mantissa m is worth m * 2^-24; int -> float
// gives m exactly (a normal float), and subtracting 24 from its exponent scales it, with no
// float arithmetic on subnormals (so flush-to-zero modes do not matter).
inline std::uint32_t f16_bits_to_f32(std::uint32_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const std::uint32_t em = h & 0x7fffu;
  const std::uint32_t m = h & 0x3ffu;
  const std::uint32_t normal = (em << 13) + 0x38000000u;  // rebias 15 -> 127
  const std::uint32_t inf_nan = (em << 13) | 0x7f800000u;
  const std::uint32_t sub =
      std::bit_cast<std::uint32_t>(static_cast<float>(static_cast<std::int32_t>(m))) - (24u << 23);
  const std::uint32_t small = select(m == 0, 0u, sub);
  const std::uint32_t r = select(em >= 0x7c00u, inf_nan, select(em < 0x400u, small, normal));
  return sign | r;
}

// f32 bits -> f16, round to nearest even. Normal results: the 13 dropped bits rounded by the
// add-and-shift trick (a carry may bump the exponent, to inf at the top). Subnormal results:
// |x| + 0.5f lines the half's subnormal unit (2^-24) up with the float's last bit, so the
// float add rounds to nearest even exactly as float_to_half does (and f32 subnormals, which
// all round to 0, give 0 even where the CPU treats them as zero).
inline std::uint32_t f32_bits_to_f16(std::uint32_t x) {
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::int32_t abs = static_cast<std::int32_t>(x & 0x7fffffffu);
  const auto uabs = static_cast<std::uint32_t>(abs);
  const std::uint32_t normal = (uabs - 0x38000000u + 0xfffu + ((uabs >> 13) & 1u)) >> 13;
  const std::uint32_t sub = std::bit_cast<std::uint32_t>(std::bit_cast<float>(uabs) + 0.5f) - 0x3f000000u;
  const std::uint32_t nan = 0x7e00u | ((uabs >> 13) & 0x3ffu);
  std::uint32_t r = select(abs < 0x38800000, sub, normal);
  r = select(abs >= 0x477ff000, 0x7c00u, r);  // rounds to >= 65520, and inf
  r = select(abs > 0x7f800000, nan, r);
  return sign | r;
}

// f32 bits -> bf16, round to nearest even; a NaN keeps its top bits and becomes quiet.
inline std::uint32_t f32_bits_to_bf16(std::uint32_t x) {
  const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (x >> 16) | 0x40u;
  return select((x & 0x7fffffffu) > 0x7f800000u, nan, rounded);
}

template <dtype From>
[[gnu::always_inline]] inline std::uint32_t load_as_f32_bits(const unsigned char* in, std::size_t i) {
  if constexpr (From == dtype::f32) {
    std::uint32_t x;
    std::memcpy(&x, in + 4 * i, 4);
    return x;
  } else {
    std::uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    if constexpr (From == dtype::f16) return f16_bits_to_f32(h);
    return static_cast<std::uint32_t>(h) << 16;
  }
}

template <dtype To>
[[gnu::always_inline]] inline void store_f32_bits(unsigned char* out, std::size_t i, std::uint32_t x) {
  if constexpr (To == dtype::f32) {
    std::memcpy(out + 4 * i, &x, 4);
  } else {
    const auto h = static_cast<std::uint16_t>(To == dtype::f16 ? f32_bits_to_f16(x) : f32_bits_to_bf16(x));
    std::memcpy(out + 2 * i, &h, 2);
  }
}

// The one conversion loop: each element read as f32 bits, written as `To`.
template <dtype From, dtype To>
[[gnu::always_inline]] inline void convert_loop(const unsigned char* __restrict in,
                                                unsigned char* __restrict out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) store_f32_bits<To>(out, i, load_as_f32_bits<From>(in, i));
}

// Picks the instantiation; on x86-64 compiled twice (AVX2 and baseline), chosen at load time.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && !defined(__SANITIZE_ADDRESS__)
[[gnu::target_clones("avx2", "default")]]
#endif
void convert_pair(int from, int to, const unsigned char* in, unsigned char* out, std::size_t n) {
  constexpr int f32 = 0, f16 = 1;
  if (from == f32) {
    if (to == f16) return convert_loop<dtype::f32, dtype::f16>(in, out, n);
    return convert_loop<dtype::f32, dtype::bf16>(in, out, n);
  }
  if (from == f16) {
    if (to == f32) return convert_loop<dtype::f16, dtype::f32>(in, out, n);
    return convert_loop<dtype::f16, dtype::bf16>(in, out, n);
  }
  if (to == f32) return convert_loop<dtype::bf16, dtype::f32>(in, out, n);
  return convert_loop<dtype::bf16, dtype::f16>(in, out, n);
}

int float_index(dtype t) {
  return t == dtype::f32 ? 0 : t == dtype::f16 ? 1 : 2;
}

}  // namespace

void convert_floats(dtype from, const void* in, dtype to, void* out, std::size_t n) {
  if (!is_floating(from) || !is_floating(to))
    throw error(errc::invalid_argument, "convert_floats",
                std::string("cannot convert ") + dtype_name(from) + " to " + dtype_name(to) +
                    "; conversions are between f32, f16 and bf16");
  if (n == 0) return;
  if (from == to) {
    std::memmove(out, in, n * dtype_size(from));
    return;
  }
  convert_pair(float_index(from), float_index(to), static_cast<const unsigned char*>(in),
               static_cast<unsigned char*>(out), n);
}

// GGUF's block formats, quantized the way ggml's reference quantizers do it (in float, so a
// checkpoint quantized by prism matches one quantized by llama.cpp): q8_0 d = amax / 127,
// q4_0 d = (the element of largest magnitude) / -8, q4_1 d = (max - min) / 15 and m = min.
void quantize_block(dtype t, const float* x, unsigned char* out) noexcept {
  auto put_half = [&](int at, float v) {
    const std::uint16_t h = float_to_half(v);
    std::memcpy(out + at, &h, 2);
  };
  if (t == dtype::q8_0) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    put_half(0, d);
    for (int j = 0; j < 32; ++j)
      out[2 + j] = static_cast<unsigned char>(static_cast<std::int8_t>(std::round(x[j] * id)));
  } else if (t == dtype::q4_0) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    const float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    put_half(0, d);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<std::int8_t>(x[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<std::int8_t>(x[j + 16] * id + 8.5f)));
      out[2 + j] = static_cast<unsigned char>(lo | (hi << 4));
    }
  } else {  // q4_1
    float lo_v = x[0], hi_v = x[0];
    for (int j = 1; j < 32; ++j) lo_v = std::min(lo_v, x[j]), hi_v = std::max(hi_v, x[j]);
    const float d = (hi_v - lo_v) / 15.0f, id = d != 0 ? 1.0f / d : 0.0f;
    put_half(0, d);
    put_half(2, lo_v);
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(static_cast<std::int8_t>((x[j] - lo_v) * id + 0.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<std::int8_t>((x[j + 16] - lo_v) * id + 0.5f)));
      out[4 + j] = static_cast<unsigned char>(lo | (hi << 4));
    }
  }
}

void dequantize_block(dtype t, const unsigned char* b, double* out) noexcept {
  auto half_at = [&](int at) {
    std::uint16_t h;
    std::memcpy(&h, b + at, 2);
    return static_cast<double>(half_to_float(h));
  };
  const double d = half_at(0);
  if (t == dtype::q8_0) {
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<std::int8_t>(b[2 + j]);
  } else if (t == dtype::q4_0) {
    for (int j = 0; j < 16; ++j) {
      out[j] = d * ((b[2 + j] & 0xF) - 8);
      out[j + 16] = d * ((b[2 + j] >> 4) - 8);
    }
  } else {
    const double m = half_at(2);
    for (int j = 0; j < 16; ++j) {
      out[j] = d * (b[4 + j] & 0xF) + m;
      out[j + 16] = d * (b[4 + j] >> 4) + m;
    }
  }
}

}  // namespace prism
