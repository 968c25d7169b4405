// SPDX-License-Identifier: Apache-2.0
// prism::buffer<T>, accessors and host accessors. Accessors declare how a command group uses a
// buffer; the runtime derives RAW/WAR/WAW dependencies and transfers from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "prism/runtime/context.hpp"
#include "prism/runtime/event.hpp"

namespace prism {

class queue;
class handler;

enum class access_mode : std::uint8_t {
  read,
  write,
  read_write,
  discard_write,       ///< write, previous contents not needed (no_init)
  discard_read_write,  ///< read_write, previous contents not needed (no_init)
};
const char* access_mode_name(access_mode m) noexcept;

/// Tags for accessor construction, SYCL style: accessor a(buf, h, prism::read_only).
struct read_only_t {
  static constexpr access_mode mode = access_mode::read;
};
struct write_only_t {
  static constexpr access_mode mode = access_mode::write;
};
struct read_write_t {
  static constexpr access_mode mode = access_mode::read_write;
};
struct discard_write_t {
  static constexpr access_mode mode = access_mode::discard_write;
};
inline constexpr read_only_t read_only{};
inline constexpr write_only_t write_only{};
inline constexpr read_write_t read_write{};
inline constexpr discard_write_t discard_write{};  ///< write_only + no_init

/// Bytes [offset, offset + bytes) of a buffer that a command touches. Accessors limited to one
/// order only against commands whose ranges overlap theirs (RAW, WAR and WAW per range), so
/// writes to disjoint slices of one storage (KV-cache rows, views) may run concurrently.
struct byte_range {
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

namespace detail {
struct buffer_impl;
/// Untyped allocation: `host` (may be null) is copied in when `copy_in`; when `write_back` the
/// contents are read back into `host` when the last handle goes away.
std::shared_ptr<buffer_impl> make_buffer(const context& ctx, std::size_t bytes, void* host, bool copy_in,
                                         bool write_back);
/// A buffer over `bytes` of foreign host memory at `host` (CL_MEM_USE_HOST_PTR); `owner` is
/// released only after the buffer and every command that used it are done.
std::shared_ptr<buffer_impl> wrap_host_memory(const context& ctx, void* host, std::size_t bytes,
                                              std::shared_ptr<const void> owner);
/// The host memory a wrapped buffer uses (nullptr for prism's own allocations).
void* buffer_host_memory(const buffer_impl& b) noexcept;
/// Over `host` without a copy, on CPU devices only (nullptr elsewhere): wrap_host_memory where
/// the device reads host memory in place (safetensors load_all's zero-copy path).
std::shared_ptr<buffer_impl> make_host_backed_buffer(const context& ctx, void* host, std::size_t bytes,
                                                     std::shared_ptr<const void> owner);
std::size_t buffer_bytes(const buffer_impl& b) noexcept;
const context& buffer_context(const buffer_impl& b) noexcept;
void buffer_set_write_back(buffer_impl& b, void* host) noexcept;
/// Blocking read of [offset, offset+bytes) into `dst`, after every pending writer.
void buffer_read(buffer_impl& b, std::size_t offset, std::size_t bytes, void* dst);
/// Blocking write of `src` into [offset, offset+bytes), ordered after all pending users.
void buffer_write(buffer_impl& b, std::size_t offset, std::size_t bytes, const void* src);
/// Maps the buffer for host access after its pending users (zero copy on CPU devices).
void* buffer_map(buffer_impl& b, access_mode mode);
void buffer_unmap(buffer_impl& b, void* ptr);
/// Declares the use of bytes [offset, offset+bytes) of `b` (checked against its size).
void handler_require(handler& h, const std::shared_ptr<buffer_impl>& b, access_mode mode, std::size_t offset,
                     std::size_t bytes);
}  // namespace detail

/// A typed device allocation, bound to host memory or device-only.
/// Bound to a non-const host pointer, the contents are written back to it when the last copy of
/// the buffer is destroyed (SYCL semantics; set_final_data(nullptr) turns that off).
/// Thread safety: safe; dependency state is protected internally.
template <class T>
class buffer {
  static_assert(std::is_trivially_copyable_v<T>, "buffer<T> needs a trivially copyable T");

 public:
  buffer() = default;
  /// Device-only, uninitialised.
  buffer(const context& ctx, std::size_t count)
      : impl_(detail::make_buffer(ctx, count * sizeof(T), nullptr, false, false)), count_(count) {}
  /// Initialised from `host`, written back to it at destruction.
  buffer(const context& ctx, T* host, std::size_t count)
      : impl_(detail::make_buffer(ctx, count * sizeof(T), host, true, true)), count_(count) {}
  /// Initialised from `host`, never written back.
  buffer(const context& ctx, const T* host, std::size_t count)
      : impl_(detail::make_buffer(ctx, count * sizeof(T), const_cast<T*>(host), true, false)),
        count_(count) {}
  buffer(const queue& q, std::size_t count);
  buffer(const queue& q, T* host, std::size_t count);
  /// Zero copy over host memory that `owner` keeps alive (released once the device is done with
  /// it), on CPU devices, whose memory is the host's: commands read and write `host` itself. An
  /// empty buffer (false) on other devices: copy instead. Used by safetensors_file::load_all
  /// over a file's private mapping.
  static buffer over_host(const context& ctx, T* host, std::size_t count, std::shared_ptr<const void> owner) {
    buffer b;
    b.impl_ = detail::make_host_backed_buffer(ctx, host, count * sizeof(T), std::move(owner));
    if (b.impl_) b.count_ = count;
    return b;
  }
  buffer(const queue& q, const T* host, std::size_t count);

  /// A buffer over foreign host memory (a NumPy array, a PyTorch tensor, a mapped file), made
  /// with CL_MEM_USE_HOST_PTR: where the device shares host memory (CPU devices such as PoCL)
  /// commands read and write `host` itself, without a copy; other devices may cache it and
  /// synchronise on maps (host_accessor). `owner` keeps the memory alive: it is released after
  /// the last copy of the buffer is gone and every command that used the buffer has finished.
  /// Nothing is written back at destruction: the memory is the buffer's own storage.
  static buffer wrap_host(const context& ctx, T* host, std::size_t count, std::shared_ptr<const void> owner) {
    return buffer(detail::wrap_host_memory(ctx, host, count * sizeof(T), std::move(owner)), count);
  }
  /// The foreign host memory of a wrap_host buffer; nullptr for prism's own allocations.
  T* host_memory() const noexcept {
    return impl_ ? static_cast<T*>(detail::buffer_host_memory(*impl_)) : nullptr;
  }

  std::size_t size() const noexcept { return count_; }
  std::size_t byte_size() const noexcept { return count_ * sizeof(T); }
  const context& get_context() const { return detail::buffer_context(*impl_); }
  void set_final_data(T* host) { detail::buffer_set_write_back(*impl_, host); }

  /// Blocking reads and writes on request, ordered after the buffer's pending users.
  std::vector<T> read() const {
    std::vector<T> out(count_);
    if (count_) detail::buffer_read(*impl_, 0, byte_size(), out.data());
    return out;
  }
  void read(std::span<T> dst, std::size_t offset = 0) const {
    if (!dst.empty()) detail::buffer_read(*impl_, offset * sizeof(T), dst.size_bytes(), dst.data());
  }
  void write(std::span<const T> src, std::size_t offset = 0) {
    if (!src.empty()) detail::buffer_write(*impl_, offset * sizeof(T), src.size_bytes(), src.data());
  }

  /// The same allocation (and dependency state) seen as elements of U, as SYCL's
  /// buffer::reinterpret: e.g. a graph_param's buffer as the bytes of a tensor. The size is
  /// byte_size() / sizeof(U), rounded down.
  template <class U>
  buffer<U> reinterpret() const {
    return buffer<U>(impl_, byte_size() / sizeof(U));
  }

  const std::shared_ptr<detail::buffer_impl>& get_impl() const noexcept { return impl_; }
  explicit operator bool() const noexcept { return impl_ != nullptr; }
  bool operator==(const buffer& o) const noexcept { return impl_ == o.impl_; }

 private:
  template <class>
  friend class buffer;
  buffer(std::shared_ptr<detail::buffer_impl> impl, std::size_t count)
      : impl_(std::move(impl)), count_(count) {}

  std::shared_ptr<detail::buffer_impl> impl_;
  std::size_t count_ = 0;
};

/// Declares a use of a buffer inside a command group, and is a kernel argument (the cl_mem of the
/// whole buffer: kernels index it themselves). By default it covers the whole buffer; an
/// accessor limited to a range (elements, SYCL order: count then offset; or a byte_range)
/// depends only on commands whose ranges overlap it.
/// Thread safety: belongs to the command group function that created it, like its handler.
template <class T>
class accessor {
 public:
  template <class Tag>
  accessor(buffer<T>& buf, handler& h, Tag) : accessor(buf, h, Tag::mode) {}
  accessor(buffer<T>& buf, handler& h, access_mode mode)
      : impl_(buf.get_impl()), mode_(mode), count_(buf.size()), bytes_{0, buf.byte_size()} {
    detail::handler_require(h, impl_, mode_, 0, bytes_.bytes);
  }
  /// Elements [offset, offset + count) of `buf`.
  template <class Tag>
  accessor(buffer<T>& buf, handler& h, std::size_t count, std::size_t offset, Tag)
      : accessor(buf, h, Tag::mode, byte_range{offset * sizeof(T), count * sizeof(T)}) {}
  /// Bytes `r` of `buf` (for byte storage shared by views, e.g. tensor::byte_extent()).
  template <class Tag>
  accessor(buffer<T>& buf, handler& h, Tag, byte_range r) : accessor(buf, h, Tag::mode, r) {}
  accessor(buffer<T>& buf, handler& h, access_mode mode, byte_range r)
      : impl_(buf.get_impl()), mode_(mode), count_(r.bytes / sizeof(T)), bytes_(r) {
    detail::handler_require(h, impl_, mode_, r.offset, r.bytes);
  }
  access_mode mode() const noexcept { return mode_; }
  /// Elements in the accessed range.
  std::size_t size() const noexcept { return count_; }
  /// The accessed bytes of the buffer.
  byte_range range_bytes() const noexcept { return bytes_; }
  detail::buffer_impl* get_impl() const noexcept { return impl_.get(); }

 private:
  std::shared_ptr<detail::buffer_impl> impl_;
  access_mode mode_;
  std::size_t count_;
  byte_range bytes_;
};

/// Host view of a buffer: waits for the buffer's pending device users, maps it, unmaps on
/// destruction (a write access then counts as a new writer).
/// Thread safety: the object may be used from one thread at a time; element access through
/// data() follows the usual rules for host memory.
template <class T>
class host_accessor {
 public:
  template <class Tag = read_write_t>
  explicit host_accessor(buffer<T>& buf, Tag = {})
      : impl_(buf.get_impl()),
        count_(buf.size()),
        ptr_(count_ ? static_cast<T*>(detail::buffer_map(*impl_, Tag::mode)) : nullptr) {}
  ~host_accessor() {
    if (ptr_) detail::buffer_unmap(*impl_, ptr_);
  }
  host_accessor(const host_accessor&) = delete;
  host_accessor& operator=(const host_accessor&) = delete;

  T* data() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return count_; }
  T& operator[](std::size_t i) const { return ptr_[i]; }
  T* begin() const noexcept { return ptr_; }
  T* end() const noexcept { return ptr_ + count_; }

 private:
  std::shared_ptr<detail::buffer_impl> impl_;
  std::size_t count_;
  T* ptr_;
};

}  // namespace prism
