// SPDX-License-Identifier: Apache-2.0
// Element types. f16 and bf16 are storage types: compute and accumulation are f32. q8_0, q4_0
// and q4_1 are GGUF's block-quantized weight formats (32 elements per block, an f16 scale, q4_1
// also an f16 min): a tensor of them is read by weight-only kernels (linear, matmul) and
// dequantized on the host; its last dim is a whole number of contiguous blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace prism {

enum class dtype : std::uint8_t { f32, f16, bf16, i32, i64, boolean, q8_0, q4_0, q4_1 };

inline constexpr dtype all_dtypes[] = {dtype::f32, dtype::f16, dtype::bf16,
                                       dtype::i32, dtype::i64, dtype::boolean};
inline constexpr dtype float_dtypes[] = {dtype::f32, dtype::f16, dtype::bf16};
inline constexpr dtype quantized_dtypes[] = {dtype::q8_0, dtype::q4_0, dtype::q4_1};

/// Bytes per element; for the block-quantized dtypes, bytes per block (see dtype_block_elements).
std::size_t dtype_size(dtype t) noexcept;
/// Elements per block: 32 for q8_0, q4_0 and q4_1, 1 for every other dtype.
std::size_t dtype_block_elements(dtype t) noexcept;
/// Storage bytes of `elements` elements (whole blocks: elements / block * block bytes).
std::size_t dtype_storage_bytes(dtype t, std::int64_t elements) noexcept;
/// "f32", "f16", "bf16", "i32", "i64", "bool", "q8_0", "q4_0", "q4_1".
const char* dtype_name(dtype t) noexcept;
/// Parses a dtype name (also accepts "float32", "float16", "bfloat16", "int32", "int64", and
/// GGUF's upper-case "Q8_0", "Q4_0", "Q4_1"). Throws errc::invalid_argument listing the valid
/// names.
dtype parse_dtype(std::string_view name);
bool is_floating(dtype t) noexcept;
bool is_quantized(dtype t) noexcept;

/// IEEE binary16 and bfloat16 conversions, round-to-nearest-even, NaN preserved.
std::uint16_t float_to_half(float f) noexcept;
float half_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_bf16(float f) noexcept;
float bf16_to_float(std::uint16_t b) noexcept;

/// Converts `n` elements between f32, f16 and bf16 (`in` as `from`, `out` as `to`, native byte
/// order, any alignment), bit for bit as the scalar functions above (f32 -> f16 / bf16 by
/// float_to_half / float_to_bf16, widening by half_to_float / bf16_to_float, f16 <-> bf16
/// through f32); the same dtype copies. Branch-free per element, so the loop vectorizes (AVX2
/// where the CPU has it): loads that convert weights are bound by memory, not by this. One
/// thread; callers split large arrays. Throws errc::invalid_argument unless both dtypes are
/// floating. Thread safety: safe (writes only `out`).
void convert_floats(dtype from, const void* in, dtype to, void* out, std::size_t n);

/// One block of a quantized dtype (q8_0, q4_0, q4_1): 32 values in, dtype_size(t) bytes out,
/// as ggml's reference quantizers compute them (so prism and llama.cpp quantize alike); and
/// back to 32 values. Thread safety: pure functions.
void quantize_block(dtype t, const float* values, unsigned char* block) noexcept;
void dequantize_block(dtype t, const unsigned char* block, double* values) noexcept;

}  // namespace prism
