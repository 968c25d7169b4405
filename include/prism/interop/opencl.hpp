// SPDX-License-Identifier: Apache-2.0
// Explicit OpenCL interop: the only public header that exposes raw OpenCL types. Used by
// prism's own CLBlast backend and by users who mix prism with other OpenCL code.
#pragma once

#include "prism/interop/cl_hpp.hpp"

#include <vector>

#include "prism/runtime/queue.hpp"

namespace prism {
namespace detail {
/// What a native command sees when it runs: the lane's queue and the events it must wait for.
struct native_args {
  cl_command_queue queue = nullptr;
  std::vector<cl_event> wait_list;
  cl_mem (*mem_of)(const buffer_impl*) = nullptr;
};
}  // namespace detail

namespace interop {

cl::Device native(const device& d);
cl::Context native(const context& c);
/// The first lane's command queue.
cl::CommandQueue native(const queue& q);
cl_mem native(const detail::buffer_impl& b);
cl_mem native(const detail::usm_alloc& a);
template <class T>
cl_mem native(const buffer<T>& b) {
  return native(*b.get_impl());
}
cl::Kernel native(const kernel& k);
cl::Program native(const program& p);
/// The cl_event of a prism event (nullptr for an already-complete default event).
cl_event native(const event& e);

/// The view a native command gets: the queue to enqueue on, the wait list to honour, and the
/// cl_mem of each accessor declared in the group.
/// Thread safety: valid only inside the native command that received it, on that thread.
class native_handle {
 public:
  explicit native_handle(detail::native_args& a) : args_(a) {}
  cl_command_queue queue() const { return args_.queue; }
  const std::vector<cl_event>& wait_list() const { return args_.wait_list; }
  cl_uint wait_count() const { return static_cast<cl_uint>(args_.wait_list.size()); }
  const cl_event* wait_events() const { return args_.wait_list.empty() ? nullptr : args_.wait_list.data(); }
  template <class T>
  cl_mem mem(const accessor<T>& a) const {
    return args_.mem_of(a.get_impl());
  }

 private:
  detail::native_args& args_;
};

/// Records a native command: `fn(native_handle&)` enqueues OpenCL work on handle.queue(),
/// waiting on handle.wait_list(), and returns the cl_event of its last command (retained by
/// prism; the caller keeps its own reference). Its accessors join dependency tracking as usual.
/// The group is submitted and `fn` runs inside this call, so `fn` may capture the group's
/// accessors and locals by reference. Declare every accessor and depends_on() before calling it
/// (a later one is an error). Inside a graph capture a native command is an error.
template <class F>
void enqueue_native(handler& h, F&& fn) {
  h.set_native_command([f = std::forward<F>(fn)](detail::native_args& a) mutable -> void* {
    native_handle nh(a);
    cl_event e = f(nh);
    return static_cast<void*>(e);
  });
}

}  // namespace interop
}  // namespace prism
