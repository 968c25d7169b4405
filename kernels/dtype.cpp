// SPDX-License-Identifier: Apache-2.0
// dtype names, sizes and the f16 / bf16 <-> f32 conversions (round-to-nearest-even, NaN kept).
#include "prism/dtype.hpp"

#include <bit>
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
  }
  return 0;
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
  }
  return "?";
}

dtype parse_dtype(std::string_view name) {
  struct alias {
    std::string_view text;
    dtype t;
  };
  static constexpr alias aliases[] = {
      {"f32", dtype::f32},        {"float32", dtype::f32}, {"f16", dtype::f16},
      {"float16", dtype::f16},    {"half", dtype::f16},    {"bf16", dtype::bf16},
      {"bfloat16", dtype::bf16},  {"i32", dtype::i32},     {"int32", dtype::i32},
      {"i64", dtype::i64},        {"int64", dtype::i64},   {"bool", dtype::boolean},
      {"boolean", dtype::boolean}};
  for (const auto& a : aliases)
    if (a.text == name) return a.t;
  throw error(errc::invalid_argument, "parse_dtype",
              "unknown dtype '" + std::string(name) +
                  "'; valid: f32, f16, bf16, i32, i64, bool (also float32, float16, bfloat16, int32, int64)");
}

bool is_floating(dtype t) noexcept {
  return t == dtype::f32 || t == dtype::f16 || t == dtype::bf16;
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

}  // namespace prism
