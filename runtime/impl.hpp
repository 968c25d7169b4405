// SPDX-License-Identifier: Apache-2.0
// The runtime's internal object model: what prism's public handles (device, context, event,
// buffer, usm allocation, program, kernel, queue) point to. Included only by runtime sources
// and by layers that need raw OpenCL handles through the interop header.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "prism/runtime.hpp"
#include "runtime/cl.hpp"

namespace prism {

struct device::impl {
  cl_device_id id = nullptr;
  cl_platform_id platform = nullptr;
  std::size_t global_index = 0, index_in_platform = 0;
  std::string name, vendor, driver_version, opencl_version, opencl_c_version, platform_name, platform_version,
      platform_vendor;
  std::uint32_t vendor_id = 0, compute_units = 0, max_clock_mhz = 0;
  std::uint64_t global_mem = 0, global_mem_cache = 0, local_mem = 0, max_alloc = 0, profiling_resolution = 0;
  std::size_t max_work_group = 0;
  std::uint32_t vector_widths[7] = {};
  device_type type = device_type::other;
  std::vector<std::string> extensions;
  bool fp16 = false, fp64 = false, svm = false, subgroups = false;
  int cl_major = 1, cl_minor = 2;  ///< from CL_DEVICE_VERSION
  device_fingerprint fingerprint;
};

struct context::impl {
  cl_context ctx = nullptr;
  device dev;
  std::uint64_t id = 0;
  /// An in-order queue for blocking buffer transfers and maps done outside any user queue.
  std::mutex io_mutex;
  cl_command_queue io_queue = nullptr;
  /// Messages from the context's notify callback; each queue alive when one arrives picks it up
  /// at its next wait.
  std::mutex notify_mutex;
  std::vector<std::string> notifications;

  cl_command_queue get_io_queue();
  ~impl();
};

namespace detail {
/// Small inline list of retained cl_events: the dependencies a command waited on.
struct event_deps {
  static constexpr int inline_count = 4;
  cl_event inline_[inline_count] = {};
  int count_ = 0;
  std::vector<cl_event> more_;
  void add(cl_event e);  ///< retains e
  template <class F>
  void for_each(F&& f) const {
    for (int i = 0; i < count_ && i < inline_count; ++i) f(inline_[i]);
    for (auto e : more_) f(e);
  }
  ~event_deps();
};
}  // namespace detail

struct event::impl {
  cl_event ev = nullptr;      ///< owned reference; nullptr = complete
  std::uint64_t lane_id = 0;  ///< lane of an in-order cl queue it was enqueued on; 0 = none
  bool profiling = false;
  bool host_task = false;
  std::atomic<bool> reported{false};  ///< its failure was already handed to an async handler
  /// A host task that threw: its user event still completes (so dependents run, as in SYCL)
  /// and the exception goes to the queue's async handler; status() says failed.
  std::atomic<bool> host_failed{false};
  std::weak_ptr<queue::impl> owner;  ///< where async errors of callbacks go
  detail::event_deps deps;
  ~impl();
};

namespace detail {

/// A command that used bytes [begin, end) of a buffer.
struct access_segment {
  std::size_t begin = 0, end = 0;
  std::shared_ptr<event::impl> ev;
};

struct buffer_impl {
  context ctx;
  cl_mem mem = nullptr;  ///< nullptr for zero-size buffers
  std::size_t bytes = 0;
  /// Creation order, process-wide: a graph owns the buffers created while it records.
  std::uint64_t serial = 0;
  void* write_back = nullptr;
  // wrap_host_memory: the foreign memory the cl_mem uses, and what keeps it alive (released
  // after the destructor has waited for every user and released the cl_mem).
  void* host_memory = nullptr;
  std::shared_ptr<const void> host_owner;
  // Dependency state; guarded by mutex. Writer segments are disjoint (each byte has at most one
  // last writer); reader segments may overlap. Whole-buffer use keeps one writer segment.
  std::mutex mutex;
  std::vector<access_segment> writers;
  std::vector<access_segment> readers;
  struct mapping {
    void* ptr;
    access_mode mode;
  };
  std::vector<mapping> mappings;
  ~buffer_impl();
};

struct usm_alloc : std::enable_shared_from_this<usm_alloc> {
  context ctx;
  usm_kind kind = usm_kind::device;
  cl_mem mem = nullptr;
  void* svm = nullptr;
  std::size_t bytes = 0;
  ~usm_alloc();
};

/// The serial the next buffer will get.
std::uint64_t next_buffer_serial() noexcept;

/// Checks `bytes` against the device's max allocation and global memory; throws
/// errc::out_of_memory naming the size and the limit.
void check_allocation(const device& dev, std::size_t bytes, const char* operation);

/// Adds `reader` of bytes [begin, end) (caller holds b.mutex), dropping readers it supersedes.
void add_reader(buffer_impl& b, std::shared_ptr<event::impl> reader, std::size_t begin, std::size_t end);
/// Makes `writer` the last writer of bytes [begin, end) (caller holds b.mutex): earlier writer
/// and reader segments are cut back to the bytes outside the range (the writer waited for them).
void set_writer(buffer_impl& b, std::shared_ptr<event::impl> writer, std::size_t begin, std::size_t end);
/// Drops every writer and reader (after a blocking operation that waited for all of them).
void clear_users(buffer_impl& b);
/// The byte range a whole-buffer use covers ([0, 1) for an empty buffer, so it still orders).
inline std::size_t whole_end(const buffer_impl& b) {
  return b.bytes ? b.bytes : 1;
}

/// Records an asynchronous error on the queue (if it still exists).
void report_async(const std::weak_ptr<queue::impl>& q, std::exception_ptr e);

/// Runs work on the runtime's threads (host tasks and event callbacks). Created on first use,
/// never destroyed.
void run_on_worker(std::function<void()> fn);
void run_on_callback_thread(std::function<void()> fn);

/// Waits for `e` and throws errc::async_error when the command failed.
void wait_event(cl_event e, const char* operation);
event_status status_of(cl_event e);

}  // namespace detail

struct program::impl {
  context ctx;
  cl_program prog = nullptr;
  std::string options, source_hash;
  std::mutex kernels_mutex;
  std::map<std::string, std::shared_ptr<kernel::impl>, std::less<>> kernels;
  ~impl();
};

struct kernel::impl {
  std::shared_ptr<program::impl> prog;
  cl_kernel k = nullptr;
  std::string name;
  cl_uint num_args = 0;
  std::mutex mutex;  ///< kernel arguments are set and the launch enqueued under it
  ~impl();
};

namespace detail {
/// One in-order OpenCL queue of a prism queue.
struct lane {
  cl_command_queue cq = nullptr;
  std::uint64_t id = 0;
  /// Last command enqueued on it, and a command outside the lane (host task) that the next
  /// command on it must wait for to keep the prism queue in order.
  std::shared_ptr<event::impl> last;
  std::shared_ptr<event::impl> pending_foreign;
};
}  // namespace detail

struct queue::impl : std::enable_shared_from_this<queue::impl> {
  context ctx;
  device dev;
  queue_options options;
  std::uint64_t id = 0;
  std::mutex mutex;  ///< submission order and lane state
  std::vector<detail::lane> lanes;
  std::uint32_t next_lane = 0;
  /// Commands submitted since the last wait, checked for failures then.
  std::vector<std::shared_ptr<event::impl>> since_wait;
  std::size_t notifications_seen = 0;
  std::mutex async_mutex;
  std::vector<std::exception_ptr> async_errors;
  /// The graph recording this queue's submissions (guarded by mutex); `recording` mirrors it
  /// for the submit path's lock-free check.
  std::shared_ptr<graph::impl> recorder;
  std::atomic<bool> recording{false};
  ~impl();
};

namespace detail {
/// The lane a command with these dependencies goes to (caller holds q.mutex).
lane& pick_lane(queue::impl& q, const event::impl* const* deps, std::size_t n);
/// Keeps a submitted command for the next wait's failure check (caller holds q.mutex).
void track_submitted(queue::impl& q, std::shared_ptr<event::impl> ev);
/// Hands a command group to the graph recording on `q` (graph.cpp).
void record_group(queue::impl& q, command_group& cg);
/// Throws when this thread is recording a graph: `what` (a blocking read, ...) cannot be recorded.
void check_not_recording(const char* operation, const char* what);
/// Sets argument `i` of `k` from a recorded argument (a usm one must name an allocation: the
/// callers report a null device_ptr in their own words); returns clSetKernelArg's status.
cl_int set_kernel_arg(cl_kernel k, cl_uint i, const kernel_arg& a);
/// Throws naming `what` unless [off, off + bytes) lies inside `size` bytes (`of`: "a buffer", ...).
void check_range(std::size_t size, std::size_t off, std::size_t bytes, const char* what, const char* of);
/// Throws naming `what` unless [off, off + bytes) lies inside buffer `b` (not null).
void check_buffer_range(const buffer_impl* b, std::size_t off, std::size_t bytes, const char* what);
/// Throws naming `what` unless `s` is a fill pattern size OpenCL takes (1 to 128 bytes, powers of 2).
void check_pattern_size(std::size_t s, const char* what);
}  // namespace detail

std::uint64_t next_object_id();

}  // namespace prism
