// A reader and a writer for the safetensors format (8-byte header length, JSON header, raw data),
// enough for Llama-style checkpoints in F32, F16 and BF16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "prism/dtype.hpp"

namespace prism::llm {

/// One tensor of a safetensors file: a view into the mapped file.
struct safetensor_view {
  std::string name;
  std::string dtype;  ///< as written in the file: "F32", "F16", "BF16", ...
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;

  std::int64_t numel() const;
  /// The elements converted to float; throws prism::error(unsupported) for dtypes other than
  /// F32, F16 and BF16.
  std::vector<float> to_floats() const;
};

/// A safetensors file mapped read-only. Thread safety: safe for concurrent reads.
class safetensors_file {
 public:
  /// Maps and validates `path`: header length, JSON, dtypes, shapes against byte ranges, ranges
  /// inside the file. Throws prism::error(io_error) or (config_error) naming the file and what
  /// was wrong.
  explicit safetensors_file(const std::string& path);
  ~safetensors_file();
  safetensors_file(const safetensors_file&) = delete;
  safetensors_file& operator=(const safetensors_file&) = delete;

  const std::string& path() const { return path_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  /// Throws prism::error(not_found) naming the tensor and the file.
  const safetensor_view& get(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::map<std::string, safetensor_view> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A tensor to write: f32 values stored as `type` (f32, f16 or bf16).
struct safetensor_data {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> values;
};

/// Writes `tensors` (in the given order) to `path` as `type`, with `metadata` in __metadata__.
/// Throws prism::error(io_error) when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<safetensor_data>& tensors, dtype type,
                       const std::map<std::string, std::string>& metadata = {});

/// "F32", "F16", "BF16" for the float dtypes.
const char* safetensors_dtype_name(dtype t);

}  // namespace prism::llm
