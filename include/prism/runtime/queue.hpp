// SPDX-License-Identifier: Apache-2.0
// prism::queue: command-group submission, SYCL style. In-order by default; an out-of-order queue
// spreads independent command groups over several in-order OpenCL queues ("lanes") and orders
// dependent ones through event wait lists derived from accessors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "prism/runtime/buffer.hpp"
#include "prism/runtime/context.hpp"
#include "prism/runtime/device.hpp"
#include "prism/runtime/event.hpp"
#include "prism/runtime/handler.hpp"
#include "prism/runtime/selector.hpp"
#include "prism/runtime/usm.hpp"

namespace prism {

/// Receives asynchronous errors (failed commands, context notifications) at wait_and_throw()
/// or throw_asynchronous(). The default handler logs each one and rethrows the first.
using async_handler = std::function<void(const std::vector<std::exception_ptr>&)>;

struct queue_options {
  bool enable_profiling = false;
  bool in_order = true;
  /// OpenCL queues used by an out-of-order queue; 0 picks 4. An in-order queue uses one.
  std::uint32_t lanes = 0;
  async_handler on_async_error;  ///< empty: log and rethrow at the next wait
};

/// Thread safety: safe; submissions from several threads are ordered as they arrive.
class queue {
 public:
  queue();  ///< default_selector_v, default options
  explicit queue(const device_selector& selector, queue_options options = {});
  explicit queue(const device& dev, queue_options options = {});
  explicit queue(const context& ctx, queue_options options = {});

  const device& get_device() const;
  const context& get_context() const;
  bool is_profiling_enabled() const;
  bool is_in_order() const;
  /// True while a prism::graph records this queue's submissions (they are recorded, not run).
  bool is_recording() const noexcept;
  std::uint32_t lane_count() const;
  std::uint64_t id() const;

  /// Records a command group with `cgf(handler&)` and enqueues it.
  template <class CommandGroup>
  event submit(CommandGroup&& cgf) {
    handler h(*this);
    cgf(h);
    if (h.done_) return std::move(h.submitted_);  // a native command submitted it already
    return submit_group(h.group());
  }

  /// Waits for every command submitted so far.
  void wait();
  /// wait(), then hands pending asynchronous errors to the handler.
  void wait_and_throw();
  void throw_asynchronous();

  // USM transfers. Byte counts for memcpy, element counts for copy/fill.
  template <class T>
  event memcpy(device_ptr<T> dst, const void* src, std::size_t bytes, const std::vector<event>& deps = {}) {
    return usm_copy(dst.get_alloc().get(), dst.byte_offset(), nullptr, 0, nullptr, src, bytes, deps);
  }
  template <class T>
  event memcpy(void* dst, device_ptr<T> src, std::size_t bytes, const std::vector<event>& deps = {}) {
    return usm_copy(nullptr, 0, src.get_alloc().get(), src.byte_offset(), dst, nullptr, bytes, deps);
  }
  template <class T, class U>
  event memcpy(device_ptr<T> dst, device_ptr<U> src, std::size_t bytes, const std::vector<event>& deps = {}) {
    return usm_copy(dst.get_alloc().get(), dst.byte_offset(), src.get_alloc().get(), src.byte_offset(),
                    nullptr, nullptr, bytes, deps);
  }
  template <class T>
  event copy(const T* src, device_ptr<T> dst, std::size_t count, const std::vector<event>& deps = {}) {
    return memcpy(dst, src, count * sizeof(T), deps);
  }
  template <class T>
  event copy(device_ptr<T> src, T* dst, std::size_t count, const std::vector<event>& deps = {}) {
    return memcpy(dst, src, count * sizeof(T), deps);
  }
  template <class T>
  event copy(device_ptr<T> src, device_ptr<T> dst, std::size_t count, const std::vector<event>& deps = {}) {
    return memcpy(dst, src, count * sizeof(T), deps);
  }
  template <class T>
  event fill(device_ptr<T> dst, const T& value, std::size_t count, const std::vector<event>& deps = {}) {
    return usm_fill(dst.get_alloc().get(), dst.byte_offset(), &value, sizeof(T), count * sizeof(T), deps);
  }

  // Buffer shortcuts (command groups under the hood, so they join dependency tracking).
  template <class T>
  event copy(buffer<T>& src, buffer<T>& dst) {
    return submit([&](handler& h) {
      accessor<T> s(src, h, read_only);
      accessor<T> d(dst, h, discard_write);
      h.copy(s, d, src.byte_size() < dst.byte_size() ? src.byte_size() : dst.byte_size());
    });
  }
  template <class T>
  event fill(buffer<T>& dst, const T& value) {
    return submit([&](handler& h) {
      accessor<T> d(dst, h, discard_write);
      h.fill(d, value, dst.size());
    });
  }

  bool operator==(const queue& o) const noexcept { return impl_ == o.impl_; }
  struct impl;
  impl& get_impl() const;

 private:
  friend class handler;
  event submit_group(detail::command_group& cg);
  event usm_copy(detail::usm_alloc* dst, std::size_t dst_off, detail::usm_alloc* src, std::size_t src_off,
                 void* host_dst, const void* host_src, std::size_t bytes, const std::vector<event>& deps);
  event usm_fill(detail::usm_alloc* dst, std::size_t off, const void* pattern, std::size_t pattern_size,
                 std::size_t bytes, const std::vector<event>& deps);
  std::shared_ptr<impl> impl_;
};

template <class T>
buffer<T>::buffer(const queue& q, std::size_t count) : buffer(q.get_context(), count) {}
template <class T>
buffer<T>::buffer(const queue& q, T* host, std::size_t count) : buffer(q.get_context(), host, count) {}
template <class T>
buffer<T>::buffer(const queue& q, const T* host, std::size_t count) : buffer(q.get_context(), host, count) {}

template <class T>
device_ptr<T> malloc_device(std::size_t count, const queue& q) {
  return malloc_device<T>(count, q.get_context());
}
template <class T>
device_ptr<T> malloc_svm(std::size_t count, const queue& q) {
  return {detail::usm_allocate(q.get_context(), count * sizeof(T), usm_kind::svm), 0};
}

}  // namespace prism
