// SPDX-License-Identifier: Apache-2.0
// Element types. f16 and bf16 are storage types: compute and accumulation are f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace prism {

enum class dtype : std::uint8_t { f32, f16, bf16, i32, i64, boolean };

inline constexpr dtype all_dtypes[] = {dtype::f32, dtype::f16, dtype::bf16,
                                       dtype::i32, dtype::i64, dtype::boolean};
inline constexpr dtype float_dtypes[] = {dtype::f32, dtype::f16, dtype::bf16};

std::size_t dtype_size(dtype t) noexcept;
/// "f32", "f16", "bf16", "i32", "i64", "bool".
const char* dtype_name(dtype t) noexcept;
/// Parses a dtype name (also accepts "float32", "float16", "bfloat16", "int32", "int64").
/// Throws errc::invalid_argument listing the valid names.
dtype parse_dtype(std::string_view name);
bool is_floating(dtype t) noexcept;

/// IEEE binary16 and bfloat16 conversions, round-to-nearest-even, NaN preserved.
std::uint16_t float_to_half(float f) noexcept;
float half_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_bf16(float f) noexcept;
float bf16_to_float(std::uint16_t b) noexcept;

}  // namespace prism
