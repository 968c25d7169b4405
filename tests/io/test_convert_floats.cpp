// SPDX-License-Identifier: Apache-2.0
// prism::convert_floats, the vectorized conversion every converting load goes through, checked
// bit for bit against the scalar reference functions (float_to_half, float_to_bf16,
// half_to_float, bf16_to_float): every 16-bit pattern, and f32 patterns around every rounding
// boundary (ties, overflow to inf, subnormal results, NaNs with payloads, infs, f32 subnormals).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "prism/dtype.hpp"
#include "prism/error.hpp"

namespace prism {
namespace {

// The f32 bit patterns that decide correctness: for every exponent, the mantissas next to the
// f16 and bf16 rounding points (ties, one below, one above, odd and even), both signs; the
// boundaries of float_to_half's cases; NaNs with assorted payloads; then random patterns.
std::vector<std::uint32_t> f32_patterns() {
  std::vector<std::uint32_t> out;
  for (std::uint32_t sign : {0u, 0x80000000u})
    for (std::uint32_t e = 0; e < 256; ++e) {
      for (std::uint32_t m : {0u, 1u, 2u, 0x7fffffu, 0x7ffffeu, 0x400000u, 0x3fffffu, 0x400001u})
        out.push_back(sign | e << 23 | m);
      for (std::uint32_t unit : {1u << 13, 1u << 16})  // the dropped bits of f16 and bf16
        for (std::uint32_t k : {0u, 1u, 2u, 3u, 0x3ffu, 0x7fu})
          for (std::int32_t d : {-1, 0, 1}) {
            const std::uint32_t m = (k * unit + unit / 2 + static_cast<std::uint32_t>(d)) & 0x7fffffu;
            out.push_back(sign | e << 23 | m);
          }
      for (std::uint32_t shift = 0; shift < 23; ++shift)  // subnormal-result ties: half of each unit
        out.push_back(sign | e << 23 | (1u << shift)),
            out.push_back(sign | e << 23 | (3u << shift & 0x7fffffu));
    }
  // float_to_half's case boundaries, each with its neighbours.
  for (std::uint32_t b : {0x7f800000u, 0x477ff000u, 0x477fe000u, 0x38800000u, 0x33000000u, 0x38000000u,
                          0x387fe000u, 0x387ff000u, 0x47800000u})
    for (std::int32_t d = -3; d <= 3; ++d)
      for (std::uint32_t sign : {0u, 0x80000000u}) out.push_back(sign | (b + static_cast<std::uint32_t>(d)));
  // NaNs: quiet and signalling, payloads in the bits f16 / bf16 keep and in those they drop.
  for (std::uint32_t m : {1u, 0x2000u, 0x10000u, 0x3fu, 0x400000u, 0x200000u, 0x7fffffu, 0x1fffu, 0xffffu})
    for (std::uint32_t sign : {0u, 0x80000000u}) out.push_back(sign | 0x7f800000u | m);
  std::mt19937 rng(14);
  for (int i = 0; i < 1 << 20; ++i) out.push_back(static_cast<std::uint32_t>(rng()));
  return out;
}

// Runs convert_floats over `count` elements at `in`, at a few misaligned starts and lengths (the
// vector loop, its remainder and unaligned mapping offsets), returning the full result.
std::vector<unsigned char> convert(dtype from, const void* in, dtype to, std::size_t count) {
  const std::size_t in_size = dtype_size(from), out_size = dtype_size(to);
  std::vector<unsigned char> src(count * in_size + 1), dst(count * out_size + 1, 0xa5);
  std::memcpy(src.data() + 1, in, count * in_size);  // odd addresses: no alignment assumed
  std::size_t done = 0;
  for (std::size_t piece : {std::size_t{7}, std::size_t{1}, std::size_t{33}, count}) {
    piece = std::min(piece, count - done);
    convert_floats(from, src.data() + 1 + done * in_size, to, dst.data() + 1 + done * out_size, piece);
    done += piece;
  }
  return {dst.begin() + 1, dst.end()};
}

TEST(ConvertFloats, F32ToHalfAndBf16MatchTheScalarFunctionsBitForBit) {
  const auto bits = f32_patterns();
  for (dtype to : {dtype::f16, dtype::bf16}) {
    const auto got = convert(dtype::f32, bits.data(), to, bits.size());
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < bits.size(); ++i) {
      const float f = std::bit_cast<float>(bits[i]);
      const std::uint16_t want = to == dtype::f16 ? float_to_half(f) : float_to_bf16(f);
      std::uint16_t have;
      std::memcpy(&have, got.data() + 2 * i, 2);
      if (have != want && wrong++ < 10)
        ADD_FAILURE() << dtype_name(to) << " of f32 0x" << std::hex << bits[i] << ": 0x" << have
                      << ", the scalar function gives 0x" << want;
    }
    EXPECT_EQ(wrong, 0u) << dtype_name(to) << ": of " << bits.size() << " patterns";
  }
}

TEST(ConvertFloats, EveryHalfAndBf16PatternWidensAndNarrowsLikeTheScalarFunctions) {
  std::vector<std::uint16_t> all(1 << 16);
  for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  for (dtype from : {dtype::f16, dtype::bf16}) {
    const auto widened = convert(from, all.data(), dtype::f32, all.size());
    const dtype other = from == dtype::f16 ? dtype::bf16 : dtype::f16;
    const auto crossed = convert(from, all.data(), other, all.size());
    std::size_t wrong = 0;
    for (std::uint32_t i = 0; i < all.size(); ++i) {
      const float f = from == dtype::f16 ? half_to_float(all[i]) : bf16_to_float(all[i]);
      std::uint32_t have;
      std::memcpy(&have, widened.data() + 4 * i, 4);
      if (have != std::bit_cast<std::uint32_t>(f) && wrong++ < 10)
        ADD_FAILURE() << dtype_name(from) << " 0x" << std::hex << i << " to f32: 0x" << have
                      << ", the scalar function gives 0x" << std::bit_cast<std::uint32_t>(f);
      const std::uint16_t want = other == dtype::f16 ? float_to_half(f) : float_to_bf16(f);
      std::uint16_t cross;
      std::memcpy(&cross, crossed.data() + 2 * i, 2);
      if (cross != want && wrong++ < 10)
        ADD_FAILURE() << dtype_name(from) << " 0x" << std::hex << i << " to " << dtype_name(other) << ": 0x"
                      << cross << ", through the scalar functions 0x" << want;
    }
    EXPECT_EQ(wrong, 0u) << dtype_name(from);
  }
}

TEST(ConvertFloats, SameDtypeCopiesAndNonFloatsAreRefused) {
  const std::vector<std::uint16_t> bits = {0x7e01, 0x0001, 0xfc00, 0x3c00};
  for (dtype t : {dtype::f16, dtype::bf16})
    EXPECT_EQ(convert(t, bits.data(), t, bits.size()),
              std::vector<unsigned char>(reinterpret_cast<const unsigned char*>(bits.data()),
                                         reinterpret_cast<const unsigned char*>(bits.data()) + 8));
  std::int32_t i = 1;
  float f = 0;
  try {
    convert_floats(dtype::i32, &i, dtype::f32, &f, 1);
    FAIL() << "i32 -> f32 was accepted";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("between f32, f16 and bf16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace prism
