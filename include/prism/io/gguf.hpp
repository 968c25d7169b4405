// SPDX-License-Identifier: Apache-2.0
// prism::io gguf: read GGUF files (llama.cpp's format, versions 2 and 3): metadata, tensor
// infos, the raw (possibly quantized) blocks, and F32/F16/BF16/Q8_0/Q4_0/Q4_1 tensors
// dequantized into prism tensors. Files are memory-mapped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "prism/dtype.hpp"
#include "prism/io/mapped_file.hpp"
#include "prism/tensor.hpp"

namespace prism::io {

/// ggml's tensor types, by their ids in the file (ggml.h's enum ggml_type).
enum class gguf_type : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  iq2_xxs = 16,
  iq2_xs = 17,
  iq3_xxs = 18,
  iq1_s = 19,
  iq4_nl = 20,
  iq3_s = 21,
  iq2_s = 22,
  iq4_xs = 23,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  iq1_m = 29,
  bf16 = 30,
  tq1_0 = 34,
  tq2_0 = 35,
  mxfp4 = 39,
};

/// "F32", "Q4_0", ...; "type <id>" for ids ggml does not define.
std::string gguf_type_name(gguf_type t);
/// The types gguf_file::dequantize() and load() convert: F32, F16, BF16, Q8_0, Q4_0, Q4_1.
bool gguf_type_dequantizable(gguf_type t) noexcept;
/// Elements per block and bytes per block (1 and the element size for unquantized types).
struct gguf_block_layout {
  std::uint32_t elements = 0;
  std::uint32_t bytes = 0;
};
/// Throws prism::error(unsupported) for ids ggml does not define.
gguf_block_layout gguf_block(gguf_type t);

/// The value types of GGUF metadata.
enum class gguf_value_type : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

/// One metadata value. Scalars: `integer` (signed and unsigned kinds, bool as 0/1) or `number`
/// (floats; integers too, as doubles). Arrays: `strings` or `numbers` with `element_type`.
struct gguf_value {
  gguf_value_type type = gguf_value_type::u8;
  gguf_value_type element_type = gguf_value_type::u8;  ///< arrays only
  std::int64_t integer = 0;
  double number = 0;
  std::string string;
  std::vector<std::string> strings;
  std::vector<double> numbers;
};

/// One tensor: its name, shape (row-major, outermost first: ggml's ne reversed), type, and the
/// raw bytes of its blocks in the mapped file (reachable for kernels that keep them quantized).
struct gguf_tensor_info {
  std::string name;
  std::vector<std::int64_t> shape;
  gguf_type type = gguf_type::f32;
  std::uint64_t offset = 0;  ///< from the start of the data section
  std::span<const std::byte> data;
  std::int64_t numel() const;
};

/// A parsed GGUF file. Thread safety: safe for concurrent reads; copies share the mapping.
class gguf_file {
 public:
  /// Maps and validates `path`: magic, version, counts, keys, values, tensor infos, alignment,
  /// and every tensor's bytes inside the file. Throws prism::error(io_error) or (config_error)
  /// naming the file, the key or tensor, and what was wrong.
  explicit gguf_file(const std::string& path);
  /// Parses bytes the caller keeps alive, with the same checks (the fuzzing entry point).
  static gguf_file parse(std::span<const std::byte> bytes, const std::string& label = "<memory>");

  const std::string& path() const { return file_->path(); }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }

  const std::map<std::string, gguf_value>& metadata() const { return metadata_; }
  bool contains_key(const std::string& key) const { return metadata_.count(key) != 0; }
  /// Typed reads; each throws prism::error(not_found) naming the key and the file when it is
  /// absent, and (config_error) naming the found type when it is another kind.
  const gguf_value& value(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;  ///< floats and integers
  bool get_bool(const std::string& key) const;
  const std::vector<std::string>& get_strings(const std::string& key) const;
  const std::vector<double>& get_numbers(const std::string& key) const;

  const std::vector<gguf_tensor_info>& tensors() const { return tensors_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  /// Throws prism::error(not_found) naming the tensor and the file.
  const gguf_tensor_info& get(const std::string& name) const;

  /// The tensor's elements as f32 in row-major order. Throws prism::error(unsupported) naming
  /// the tensor and its type for types other than F32, F16, BF16, Q8_0, Q4_0 and Q4_1.
  std::vector<float> dequantize(const std::string& name) const;
  /// The tensor on q's device as `as`: a float dtype (dequantized), or q8_0, q4_0, q4_1. When
  /// `as` is the file's own type the blocks are copied as they are (a Q4_0 tensor loaded as q4_0
  /// stays quantized); otherwise the values are dequantized and, for a quantized `as`,
  /// requantized (the last dim must then be a multiple of 32).
  tensor load(const queue& q, const std::string& name, prism::dtype as = prism::dtype::f32) const;

 private:
  explicit gguf_file(std::shared_ptr<const mapped_file> file);
  std::shared_ptr<const mapped_file> file_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::map<std::string, gguf_value> metadata_;
  std::vector<gguf_tensor_info> tensors_;
  std::map<std::string, std::size_t> index_;
};

/// prism's dtype for a GGUF type stored as it is (F32, F16, BF16, Q8_0, Q4_0, Q4_1), else nullopt.
std::optional<prism::dtype> gguf_prism_dtype(gguf_type t) noexcept;

/// Dequantizes `count` elements of `type` from `blocks` (whole blocks) into `out`. Throws
/// prism::error(unsupported) for types other than F32, F16, BF16, Q8_0, Q4_0 and Q4_1.
void gguf_dequantize(gguf_type type, std::span<const std::byte> blocks, std::span<float> out);

}  // namespace prism::io
