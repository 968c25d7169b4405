// SPDX-License-Identifier: Apache-2.0
// prism::io safetensors: read Hugging Face .safetensors files (one file, or a sharded checkpoint
// with its index) straight into prism tensors, and write them. Files are memory-mapped.
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

/// One tensor of a safetensors file: a view into the mapped bytes.
struct safetensor_view {
  std::string name;
  std::string dtype;  ///< as written in the file: "F32", "F16", "BF16", "I64", ...
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;

  std::int64_t numel() const;
  /// The prism dtype of the stored elements, when prism has one (F32, F16, BF16, I32, I64,
  /// BOOL); std::nullopt otherwise.
  std::optional<prism::dtype> prism_dtype() const;
  /// The elements converted to float; throws prism::error(unsupported) for dtypes other than
  /// F32, F16 and BF16.
  std::vector<float> to_floats() const;
};

/// Where tensors that load as stored live on CPU devices (other devices always get one copy).
enum class cpu_placement {
  /// The file's private mapping itself: no copy, the fastest load (the default). Its pages are
  /// the page cache's 4 KiB ones.
  mapped,
  /// One copy into prism's own memory, on 2 MiB pages where the OS gives them
  /// (PRISM_HUGE_PAGES): a slower load, and faster streaming reads for every pass after it
  /// (decode on the 2-core PoCL machine: benchmarks/RESULTS.md, "Issue 14, session 10").
  copied,
};

/// A parsed safetensors file. Thread safety: safe for concurrent reads; copies share the mapping.
class safetensors_file {
 public:
  /// Maps and validates `path`: header length, JSON, dtypes, shapes against byte ranges, ranges
  /// inside the file. Throws prism::error(io_error) or (config_error) naming the file, the
  /// tensor and what was wrong.
  explicit safetensors_file(const std::string& path);
  /// Parses bytes the caller keeps alive, with the same checks (the fuzzing entry point).
  static safetensors_file parse(std::span<const std::byte> bytes, const std::string& label = "<memory>");

  const std::string& path() const { return file_->path(); }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  /// Throws prism::error(not_found) naming the tensor and the file.
  const safetensor_view& get(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  /// The tensor on q's device, contiguous, stored as `as` (default: its own type). Floats convert
  /// between f32, f16 and bf16 (RNE); a same-type load is one copy from the mapped file.
  tensor load(const queue& q, const std::string& name, std::optional<prism::dtype> as = {}) const;
  /// Every tensor, as load() gives it, by name: load_named() of names().
  std::map<std::string, tensor> load_all(const queue& q, std::optional<prism::dtype> as = {},
                                         cpu_placement place = cpu_placement::mapped) const;
  /// The named tensors, as load() gives them, by name: the fast way to load a checkpoint
  /// (benchmarks/io). Tensors that load as stored share one buffer over the byte range they span
  /// (views at their file offsets): on CPU devices the file's private mapping itself, made
  /// resident, with no copy (`place` mapped), or one copy into prism's memory (copied);
  /// elsewhere one copy. Tensors that convert (f32, f16, bf16) are
  /// converted straight from the mapping into one shared allocation (the buffer itself on CPU
  /// devices, else copied once). Whatever the device's largest allocation cannot hold together
  /// loads one by one. Every name is checked (not_found, unsupported) before anything loads.
  std::map<std::string, tensor> load_named(const queue& q, const std::vector<std::string>& names,
                                           std::optional<prism::dtype> as = {},
                                           cpu_placement place = cpu_placement::mapped) const;

 private:
  explicit safetensors_file(std::shared_ptr<const mapped_file> file);
  std::shared_ptr<const mapped_file> file_;
  std::map<std::string, safetensor_view> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// A Hugging Face checkpoint: a folder with model.safetensors, or with
/// model.safetensors.index.json and its shards; or one .safetensors file. Each tensor is found
/// in the shard the index names. Thread safety: safe for concurrent reads.
class safetensors_checkpoint {
 public:
  /// Throws prism::error(not_found) when the folder has neither file, (config_error) when the
  /// index is malformed or names a tensor its shard lacks.
  explicit safetensors_checkpoint(const std::string& path);
  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  /// Throws prism::error(not_found) naming the tensor and the checkpoint.
  const safetensor_view& get(const std::string& name) const;
  std::vector<std::string> names() const;
  const std::vector<safetensors_file>& shards() const { return shards_; }
  tensor load(const queue& q, const std::string& name, std::optional<prism::dtype> as = {}) const;
  /// Every tensor of every shard (safetensors_file::load_all, one buffer per shard).
  std::map<std::string, tensor> load_all(const queue& q, std::optional<prism::dtype> as = {},
                                         cpu_placement place = cpu_placement::mapped) const;
  /// The named tensors, each from the shard the index names (safetensors_file::load_named per
  /// shard). Throws prism::error(not_found) naming a tensor the checkpoint lacks.
  std::map<std::string, tensor> load_named(const queue& q, const std::vector<std::string>& names,
                                           std::optional<prism::dtype> as = {},
                                           cpu_placement place = cpu_placement::mapped) const;

 private:
  std::string path_;
  std::vector<safetensors_file> shards_;
  std::map<std::string, std::size_t> where_;
};

/// A tensor to write: f32 values stored as the file's type.
struct safetensor_data {
  std::string name;
  std::vector<std::int64_t> shape;
  std::span<const float> values;
};

/// Writes `tensors` (in the given order) to `path` as `type` (f32, f16 or bf16), with
/// `metadata` in __metadata__. Throws prism::error(io_error) when the file cannot be written.
void write_safetensors(const std::string& path, const std::vector<safetensor_data>& tensors,
                       prism::dtype type, const std::map<std::string, std::string>& metadata = {});

/// "F32", "F16", "BF16" for the float dtypes; throws prism::error(invalid_argument) otherwise.
const char* safetensors_dtype_name(prism::dtype t);

}  // namespace prism::io
