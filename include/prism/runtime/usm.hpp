// SPDX-License-Identifier: Apache-2.0
// USM-style device allocations: a typed pointer handle (allocation + element offset) backed by a
// cl_mem. Ordering of USM commands is the queue's (in-order) or explicit depends_on events.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>

#include "prism/runtime/context.hpp"

namespace prism {

class queue;

enum class usm_kind { device, svm };

namespace detail {
struct usm_alloc;
std::shared_ptr<usm_alloc> usm_allocate(const context& ctx, std::size_t bytes, usm_kind kind);
std::size_t usm_bytes(const usm_alloc& a) noexcept;
void* usm_svm_pointer(const usm_alloc& a) noexcept;  ///< host-visible pointer of an SVM allocation
}  // namespace detail

/// A device pointer. Kernel arguments of this type pass the allocation (cl_mem or SVM pointer);
/// a kernel that should see `offset()` takes it as an extra argument.
/// Copies share the allocation; it is released by prism::free or when the last copy goes.
/// Thread safety: a value; distinct copies may be used from different threads, one object is
/// not safe to reset() while another thread reads it.
template <class T>
class device_ptr {
 public:
  device_ptr() = default;
  device_ptr(std::shared_ptr<detail::usm_alloc> a, std::size_t offset)
      : alloc_(std::move(a)), offset_(offset) {}

  std::size_t offset() const noexcept { return offset_; }  ///< in elements
  std::size_t byte_offset() const noexcept { return offset_ * sizeof(T); }
  std::size_t capacity() const noexcept { return alloc_ ? detail::usm_bytes(*alloc_) / sizeof(T) : 0; }
  device_ptr operator+(std::size_t n) const { return {alloc_, offset_ + n}; }
  explicit operator bool() const noexcept { return alloc_ != nullptr; }
  /// Host pointer of an SVM allocation (nullptr for device allocations).
  T* svm_data() const noexcept {
    return alloc_ ? static_cast<T*>(detail::usm_svm_pointer(*alloc_)) + offset_ : nullptr;
  }
  const std::shared_ptr<detail::usm_alloc>& get_alloc() const noexcept { return alloc_; }
  void reset() noexcept {
    alloc_.reset();
    offset_ = 0;
  }

 private:
  std::shared_ptr<detail::usm_alloc> alloc_;
  std::size_t offset_ = 0;
};

/// Device memory for `count` elements. Throws errc::out_of_memory when larger than the device
/// allows, naming the size asked and the limit.
template <class T>
device_ptr<T> malloc_device(std::size_t count, const context& ctx) {
  return {detail::usm_allocate(ctx, count * sizeof(T), usm_kind::device), 0};
}
template <class T>
device_ptr<T> malloc_device(std::size_t count, const queue& q);
/// Coarse-grain SVM; throws errc::unsupported on devices without SVM.
template <class T>
device_ptr<T> malloc_svm(std::size_t count, const queue& q);

template <class T>
void free(device_ptr<T>& p) noexcept {
  p.reset();
}

}  // namespace prism
