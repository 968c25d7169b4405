// SPDX-License-Identifier: Apache-2.0
// prism::tensor: a strided view (up to 8 dims, strides in elements, element offset) over device
// storage. Views (transpose, permute, slice, reshape where possible, expand) never copy.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "prism/dtype.hpp"
#include "prism/runtime/buffer.hpp"
#include "prism/runtime/queue.hpp"

namespace prism {

inline constexpr int max_tensor_dims = 8;

/// A small fixed-capacity list of extents or strides. Thread safety: a plain value type.
class dims {
 public:
  dims() = default;
  dims(std::initializer_list<std::int64_t> v);
  explicit dims(std::span<const std::int64_t> v);
  int size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  std::int64_t& operator[](int i) { return v_[i]; }
  std::int64_t operator[](int i) const { return v_[i]; }
  const std::int64_t* begin() const noexcept { return v_.data(); }
  const std::int64_t* end() const noexcept { return v_.data() + n_; }
  std::int64_t* begin() noexcept { return v_.data(); }
  std::int64_t* end() noexcept { return v_.data() + n_; }
  void push_back(std::int64_t x);
  void insert(int pos, std::int64_t x);
  void erase(int pos);
  std::int64_t product() const noexcept;
  std::vector<std::int64_t> to_vector() const { return {begin(), end()}; }
  std::string str() const;  ///< "[2, 3, 4]"
  bool operator==(const dims& o) const noexcept;

 private:
  std::array<std::int64_t, max_tensor_dims> v_{};
  int n_ = 0;
};

/// Thread safety: a tensor is a value (shape + shared storage); concurrent reads are safe,
/// concurrent writes to one storage are ordered by the runtime's dependency tracking.
class tensor {
 public:
  tensor() = default;

  /// Contiguous, uninitialised.
  static tensor empty(const queue& q, const dims& shape, dtype t);
  /// Contiguous copy of `bytes` (dtype_storage_bytes(t, numel) bytes, in `t`'s storage format:
  /// whole blocks for the quantized dtypes).
  static tensor from_host(const queue& q, const void* bytes, const dims& shape, dtype t);
  /// From f32 values converted to `t` (RNE for f16/bf16, truncation toward zero for ints,
  /// ggml's reference quantizers for q8_0, q4_0 and q4_1).
  static tensor from_floats(const queue& q, std::span<const float> values, const dims& shape, dtype t);
  /// A view over foreign host memory, without a copy where the device shares host memory (see
  /// buffer::wrap_host): `data` is the address of element [0, ..., 0]; `strides` (in elements,
  /// negative ones too) give the layout; `owner` keeps the memory alive until the storage and
  /// every command using it are gone. The storage begins at the lowest element rounded down to
  /// 128 bytes (what CPU drivers need to use memory in place), so it may include up to 127
  /// bytes before the view that commands never touch. Throws errc::invalid_argument when `data`
  /// is not aligned to the dtype's size or the layout does not fit (rank, shape).
  static tensor wrap_host(const queue& q, void* data, const dims& shape, const dims& strides, dtype t,
                          std::shared_ptr<const void> owner);
  /// A view over existing storage.
  tensor(buffer<std::byte> storage, const dims& shape, const dims& strides, std::int64_t offset, dtype t);

  dtype type() const noexcept { return dtype_; }
  const dims& shape() const noexcept { return shape_; }
  const dims& strides() const noexcept { return strides_; }
  std::int64_t offset() const noexcept { return offset_; }  ///< in elements
  int dim() const noexcept { return shape_.size(); }
  std::int64_t size(int d) const;  ///< negative d counts from the end
  std::int64_t numel() const noexcept { return shape_.product(); }
  std::size_t nbytes() const noexcept { return dtype_storage_bytes(dtype_, numel()); }
  bool is_contiguous() const noexcept;
  bool defined() const noexcept { return static_cast<bool>(storage_); }
  const buffer<std::byte>& storage() const noexcept { return storage_; }
  buffer<std::byte>& storage() noexcept { return storage_; }
  const context& get_context() const { return storage_.get_context(); }
  /// The storage bytes the view can touch: offset .. offset + the extent of its strides (empty
  /// for an empty view). Accessors built with it order only against overlapping views.
  byte_range byte_extent() const noexcept;
  /// True when both views share storage.
  bool same_storage(const tensor& o) const noexcept { return storage_ == o.storage_; }

  // Views: no copy.
  tensor transpose(int d0, int d1) const;
  tensor permute(const dims& order) const;
  tensor slice(int d, std::int64_t start, std::int64_t end, std::int64_t step = 1) const;
  tensor select(int d, std::int64_t index) const;
  tensor reshape(const dims& shape) const;  ///< throws when the strides cannot express it
  tensor unsqueeze(int d) const;
  tensor squeeze(int d) const;
  tensor expand(const dims& shape) const;  ///< broadcast: size-1 dims get stride 0

  /// A contiguous copy, or *this when already contiguous.
  tensor contiguous(queue& q) const;
  /// Reads the logical elements (in row-major order of the view) to host, in storage format.
  std::vector<std::byte> to_host(queue& q) const;
  /// Reads the logical elements converted to f32 (ints and bool converted by value).
  std::vector<float> to_floats(queue& q) const;

  std::string str() const;  ///< "f16[2, 3] strides [3, 1] +0"

 private:
  buffer<std::byte> storage_;
  dims shape_;
  dims strides_;
  std::int64_t offset_ = 0;
  dtype dtype_ = dtype::f32;
};

/// Row-major strides for a shape.
dims contiguous_strides(const dims& shape);

}  // namespace prism
