// SPDX-License-Identifier: Apache-2.0
// prism::handler: what a command group records: buffer requirements, explicit dependencies and
// one command (kernel launch, copy, fill, host task or native OpenCL command).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include "prism/error.hpp"
#include "prism/runtime/buffer.hpp"
#include "prism/runtime/event.hpp"
#include "prism/runtime/program.hpp"
#include "prism/runtime/range.hpp"
#include "prism/runtime/usm.hpp"

namespace prism {

class queue;

/// A kernel argument for __local memory of `bytes` bytes.
struct local_memory {
  std::size_t bytes;
};

/// A buffer argument that is `acc` where `used`, else NULL: for a launch that leaves some of its
/// kernel's __global parameters unread. The accessor still orders the command (the group's
/// dependencies are unchanged); a NULL argument only spares the OpenCL driver its per-buffer work
/// on each enqueue (about 0.3 us a buffer on PoCL and 0.23 us on NVIDIA, benchmarks/RESULTS.md).
template <class T>
struct buffer_if {
  const accessor<T>& acc;
  bool used;
};

namespace detail {
struct queue_impl;
struct native_args;

struct kernel_arg {
  enum class kind : std::uint8_t { value, buffer, usm, local } k = kind::value;
  std::uint32_t size = 0;
  const void* object = nullptr;  ///< buffer_impl* or usm_alloc*
  alignas(16) unsigned char bytes[64];
};

struct requirement {
  std::shared_ptr<buffer_impl> buf;
  access_mode mode;
  std::size_t begin = 0, end = 0;  ///< bytes; whole-buffer accesses of an empty buffer use [0, 1)
};

enum class command_kind : std::uint8_t { none, kernel, copy, fill, host_task, native, host_write, host_read };
const char* command_kind_name(command_kind k) noexcept;

/// Everything a command group recorded. Kept inline in the handler: no heap work for small groups.
struct command_group {
  static constexpr std::size_t max_args = 32;
  command_kind kind = command_kind::none;
  const kernel* kern = nullptr;
  nd_range range;
  kernel_arg args[max_args];
  std::uint32_t arg_count = 0;
  std::vector<requirement> requirements;
  std::vector<event> depends;
  // copy / fill
  buffer_impl* src = nullptr;
  buffer_impl* dst = nullptr;
  std::size_t src_offset = 0, dst_offset = 0, bytes = 0;
  alignas(16) unsigned char pattern[64];
  std::size_t pattern_size = 0;
  const void* host_src = nullptr;  ///< host_write
  void* host_dst = nullptr;        ///< host_read
  std::function<void()> host_fn;
  std::function<void*(native_args&)> native_fn;
};
}  // namespace detail

/// Thread safety: a handler belongs to the command group function that received it.
class handler {
 public:
  handler(const handler&) = delete;
  handler& operator=(const handler&) = delete;

  void depends_on(const event& e) {
    check_open("depends_on");
    if (e) cg_.depends.push_back(e);
  }
  void depends_on(const std::vector<event>& events) {
    for (auto& e : events) depends_on(e);
  }

  /// Launches `k` over `r` with `args`: accessors, device_ptrs, local_memory and trivially
  /// copyable values, in the kernel's parameter order. The group records a pointer to `k`, which
  /// must outlive the submit call (a temporary kernel is refused at compile time).
  template <class... Args>
  void parallel_for(const nd_range& r, const kernel& k, const Args&... args) {
    set_command(detail::command_kind::kernel);
    cg_.kern = &k;
    cg_.range = r;
    cg_.arg_count = 0;
    (add_arg(args), ...);
  }
  template <class... Args>
  void parallel_for(const nd_range& r, kernel&& k, const Args&... args) = delete;

  /// Copies `bytes` from src to dst (byte offsets). Both accessors must be part of this group.
  template <class T, class U>
  void copy(const accessor<T>& src, const accessor<U>& dst, std::size_t bytes, std::size_t src_offset = 0,
            std::size_t dst_offset = 0) {
    set_command(detail::command_kind::copy);
    cg_.src = src.get_impl();
    cg_.dst = dst.get_impl();
    cg_.bytes = bytes;
    cg_.src_offset = src_offset;
    cg_.dst_offset = dst_offset;
  }
  /// Fills `count` elements of `dst` from element `offset` with `value`.
  template <class T>
  void fill(const accessor<T>& dst, const T& value, std::size_t count, std::size_t offset = 0) {
    static_assert(sizeof(T) <= sizeof(detail::command_group::pattern), "fill pattern too large");
    set_command(detail::command_kind::fill);
    cg_.dst = dst.get_impl();
    std::memcpy(cg_.pattern, &value, sizeof(T));
    cg_.pattern_size = sizeof(T);
    cg_.dst_offset = offset * sizeof(T);
    cg_.bytes = count * sizeof(T);
  }
  /// Copies `bytes` from host memory at `src` into `dst` from byte `dst_offset`, without blocking:
  /// `src` must stay valid and unchanged until the command completes.
  template <class T>
  void copy_from_host(const void* src, const accessor<T>& dst, std::size_t bytes,
                      std::size_t dst_offset = 0) {
    set_command(detail::command_kind::host_write);
    cg_.host_src = src;
    cg_.dst = dst.get_impl();
    cg_.bytes = bytes;
    cg_.dst_offset = dst_offset;
  }
  /// Copies `bytes` of `src` from byte `src_offset` into host memory at `dst`, without blocking:
  /// `dst` holds the bytes once the returned event completes (wait on it), and must stay valid
  /// until then. The read is ordered like any reader of `src`, so a later writer of `src` (the
  /// next replay of a graph, say) does not disturb it: a host can run ahead of the device.
  template <class T>
  void copy_to_host(const accessor<T>& src, void* dst, std::size_t bytes, std::size_t src_offset = 0) {
    set_command(detail::command_kind::host_read);
    cg_.src = src.get_impl();
    cg_.host_dst = dst;
    cg_.bytes = bytes;
    cg_.src_offset = src_offset;
  }
  /// Runs `fn` on a runtime thread once the group's dependencies are done.
  void host_task(std::function<void()> fn) {
    set_command(detail::command_kind::host_task);
    cg_.host_fn = std::move(fn);
  }

  /// Used by interop::enqueue_native; see prism/interop/opencl.hpp. The group is submitted and
  /// `fn` runs here, while the command-group function (and everything it holds by reference,
  /// accessors included) is still alive; nothing may be declared in the group after it.
  void set_native_command(std::function<void*(detail::native_args&)> fn) {
    set_command(detail::command_kind::native);
    cg_.native_fn = std::move(fn);
    submit_now();
  }
  void require(const std::shared_ptr<detail::buffer_impl>& b, access_mode mode, std::size_t begin,
               std::size_t end) {
    check_open("accessor");
    cg_.requirements.push_back({b, mode, begin, end});
  }
  detail::command_group& group() noexcept { return cg_; }

 private:
  friend class queue;
  explicit handler(queue& q) : queue_(&q) {}

  /// Submits the group now (native commands); queue::submit then returns `submitted_`.
  void submit_now();
  void check_open(const char* what) const {
    if (done_)
      throw error(errc::invalid_argument, what,
                  "declared after interop::enqueue_native in the same command group; the native command "
                  "runs inside enqueue_native, so declare every accessor and depends_on() before it");
  }

  void set_command(detail::command_kind k) {
    if (cg_.kind != detail::command_kind::none)
      throw error(errc::invalid_argument, "handler",
                  "a command group holds exactly one command; a second was recorded");
    cg_.kind = k;
  }
  detail::kernel_arg& next_arg() {
    if (cg_.arg_count == detail::command_group::max_args)
      throw error(errc::invalid_argument, "handler::parallel_for", "more than 32 kernel arguments");
    return cg_.args[cg_.arg_count++];
  }
  template <class T>
  void add_arg(const accessor<T>& a) {
    auto& arg = next_arg();
    arg.k = detail::kernel_arg::kind::buffer;
    arg.object = a.get_impl();
  }
  template <class T>
  void add_arg(const buffer_if<T>& b) {
    if (b.used) return add_arg(b.acc);
    auto& arg = next_arg();  // a NULL cl_mem: OpenCL passes NULL to the pointer parameter
    arg.k = detail::kernel_arg::kind::value;
    arg.size = sizeof(void*);
    std::memset(arg.bytes, 0, sizeof(void*));
  }
  template <class T>
  void add_arg(const device_ptr<T>& p) {
    auto& arg = next_arg();
    arg.k = detail::kernel_arg::kind::usm;
    arg.object = p.get_alloc().get();
  }
  void add_arg(const local_memory& l) {
    auto& arg = next_arg();
    arg.k = detail::kernel_arg::kind::local;
    arg.size = static_cast<std::uint32_t>(l.bytes);
  }
  template <class T>
  void add_arg(const T& v) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 64,
                  "kernel arguments are accessors, device_ptrs, local_memory or trivially copyable values up "
                  "to 64 bytes");
    auto& arg = next_arg();
    arg.k = detail::kernel_arg::kind::value;
    arg.size = sizeof(T);
    std::memcpy(arg.bytes, &v, sizeof(T));
  }

  detail::command_group cg_;
  queue* queue_ = nullptr;
  bool done_ = false;
  event submitted_;
};

}  // namespace prism
