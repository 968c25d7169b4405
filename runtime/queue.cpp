// SPDX-License-Identifier: Apache-2.0
// Queues: lanes of in-order OpenCL queues, command-group submission with RAW/WAR/WAW tracking,
// host tasks, native commands, USM transfers, waits and asynchronous error delivery.
#include <algorithm>

#include "prism/interop/opencl.hpp"
#include "runtime/impl.hpp"
#include "runtime/log.hpp"
#include "runtime/sync.hpp"

namespace prism {
namespace {

bool writes(access_mode m) {
  return m != access_mode::read;
}

cl_command_queue create_lane_queue(const context::impl& c, bool profiling) {
  auto& d = c.dev.get_impl();
  cl_int st = CL_SUCCESS;
  cl_command_queue q = nullptr;
  if (d.cl_major >= 2) {
    cl_queue_properties props[] = {
        CL_QUEUE_PROPERTIES, profiling ? static_cast<cl_queue_properties>(CL_QUEUE_PROFILING_ENABLE) : 0, 0};
    q = clCreateCommandQueueWithProperties(c.ctx, d.id, props, &st);
  } else {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    q = clCreateCommandQueue(c.ctx, d.id, profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &st);
#pragma GCC diagnostic pop
  }
  detail::check_cl(st, "clCreateCommandQueue", "device " + d.name);
  return q;
}

std::shared_ptr<queue::impl> make_queue(const context& ctx, queue_options options) {
  auto q = std::make_shared<queue::impl>();
  q->ctx = ctx;
  q->dev = ctx.get_device();
  q->options = std::move(options);
  q->id = next_object_id();
  std::uint32_t n = q->options.in_order ? 1 : (q->options.lanes ? q->options.lanes : 4);
  if (n > 64)
    throw error(errc::invalid_argument, "queue", "lanes=" + std::to_string(n) + " is too many; use 1 to 64");
  q->lanes.resize(n);
  for (auto& l : q->lanes) {
    l.cq = create_lane_queue(ctx.get_impl(), q->options.enable_profiling);
    l.id = next_object_id();
  }
  q->since_wait.reserve(256);
  {
    // A queue reports the context's notifications from its creation on; those before it went to
    // the queues that were there (on NVIDIA, another queue's failure left one that every later
    // queue of the default context rethrew at its first wait).
    auto& c = ctx.get_impl();
    std::lock_guard lock(c.notify_mutex);
    q->notifications_seen = c.notifications.size();
  }
  log::get("runtime")->debug("queue {} on {}: {} lane(s), {}, profiling {}", q->id, q->dev.name(), n,
                             q->options.in_order ? "in-order" : "out-of-order",
                             q->options.enable_profiling ? "on" : "off");
  return q;
}

/// Drops finished events from since_wait when it grows, so a queue that is never waited on does
/// not keep every event alive; failures found here are kept for the next wait.
void prune_finished(queue::impl& q) {
  std::vector<std::exception_ptr> failed;
  auto keep =
      std::remove_if(q.since_wait.begin(), q.since_wait.end(), [&](const std::shared_ptr<event::impl>& e) {
        auto s = detail::status_of(e->ev);
        if (s == event_status::complete) return true;
        if (s == event_status::failed) {
          if (!e->host_task && !e->reported.exchange(true))
            failed.push_back(std::make_exception_ptr(error(errc::async_error, "queue " + std::to_string(q.id),
                                                           "a command failed on " + q.dev.name())));
          return true;
        }
        return false;
      });
  q.since_wait.erase(keep, q.since_wait.end());
  if (!failed.empty()) {
    std::lock_guard lock(q.async_mutex);
    for (auto& f : failed) q.async_errors.push_back(f);
  }
}

cl_mem mem_of_buffer(const detail::buffer_impl* b) {
  return b ? b->mem : nullptr;
}

/// The buffers of a command group, deduplicated (modes merged, ranges widened to their hull) in
/// order of their last declaration; locked in address order.
struct locked_requirements {
  struct entry {
    detail::buffer_impl* buf;
    access_mode mode;
    std::size_t begin, end;
  };
  static constexpr std::size_t inline_count = 8;
  entry inline_[inline_count]{};
  std::vector<entry> more_;
  std::size_t n = 0;
  std::vector<detail::buffer_impl*> lock_order_;  ///< only for groups of more than 8 buffers
  detail::buffer_impl* locked_inline_[inline_count]{};
  bool locked = false;
  entry* data() { return n <= inline_count ? inline_ : more_.data(); }

  void add(detail::buffer_impl* b, access_mode m, std::size_t begin, std::size_t end) {
    entry* e = data();
    for (std::size_t i = 0; i < n; ++i)
      if (e[i].buf == b) {
        entry merged{b, e[i].mode == m ? m : access_mode::read_write, std::min(e[i].begin, begin),
                     std::max(e[i].end, end)};
        // Moved to the end: the last declared accessor's dependency picks the lane.
        std::copy(e + i + 1, e + n, e + i);
        e[n - 1] = merged;
        return;
      }
    if (n < inline_count) {
      inline_[n++] = {b, m, begin, end};
    } else {
      if (more_.empty()) more_.assign(inline_, inline_ + inline_count);
      more_.push_back({b, m, begin, end});
      ++n;
    }
  }
  detail::buffer_impl** order() { return n <= inline_count ? locked_inline_ : lock_order_.data(); }
  void lock() {
    if (n > inline_count) lock_order_.resize(n);
    auto** o = order();
    for (std::size_t i = 0; i < n; ++i) o[i] = data()[i].buf;
    std::sort(o, o + n);
    for (std::size_t i = 0; i < n; ++i) o[i]->mutex.lock();
    locked = true;
  }
  ~locked_requirements() {
    if (locked)
      for (std::size_t i = 0; i < n; ++i) order()[i]->mutex.unlock();
  }
};

}  // namespace

queue::impl::~impl() {
  for (auto& l : lanes) {
    if (!l.cq) continue;
    clFinish(l.cq);
    l.last.reset();
    l.pending_foreign.reset();
    clReleaseCommandQueue(l.cq);
  }
  std::lock_guard lock(async_mutex);
  for (auto& e : async_errors) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      log::get("runtime")->error("queue {} destroyed with an unhandled asynchronous error: {}", id,
                                 ex.what());
    } catch (...) {
      log::get("runtime")->error("queue {} destroyed with an unhandled asynchronous error", id);
    }
  }
}

queue::queue() : queue(default_selector_v) {}
queue::queue(const device_selector& selector, queue_options options)
    : queue(select_device(selector), std::move(options)) {}
queue::queue(const device& dev, queue_options options)
    : queue(context::get_default(dev), std::move(options)) {}
queue::queue(const context& ctx, queue_options options) : impl_(make_queue(ctx, std::move(options))) {}

queue::impl& queue::get_impl() const {
  if (!impl_) throw error(errc::invalid_argument, "prism::queue", "use of an empty queue");
  return *impl_;
}
const device& queue::get_device() const {
  return get_impl().dev;
}
const context& queue::get_context() const {
  return get_impl().ctx;
}
bool queue::is_profiling_enabled() const {
  return get_impl().options.enable_profiling;
}
bool queue::is_recording() const noexcept {
  return impl_ && impl_->recording.load(std::memory_order_acquire);
}
bool queue::is_in_order() const {
  return get_impl().options.in_order;
}
std::uint32_t queue::lane_count() const {
  return static_cast<std::uint32_t>(get_impl().lanes.size());
}
std::uint64_t queue::id() const {
  return get_impl().id;
}

namespace {

/// Picks the lane for a command: in-order queues have one; otherwise the lane of the most
/// recent dependency on this queue (that wait is then free), else the next lane round-robin.
detail::lane& choose_lane(queue::impl& q, const event::impl* const* deps, std::size_t n) {
  if (q.lanes.size() == 1) return q.lanes[0];
  for (std::size_t i = n; i-- > 0;) {
    const event::impl* d = deps[i];
    if (!d || !d->lane_id) continue;
    for (auto& l : q.lanes)
      if (l.id == d->lane_id) return l;
  }
  auto& l = q.lanes[q.next_lane];
  q.next_lane = (q.next_lane + 1) % static_cast<std::uint32_t>(q.lanes.size());
  return l;
}

void enqueue_kernel(detail::command_group& cg, cl_command_queue cq, const detail::wait_list& wl,
                    cl_event* out, const context& ctx) {
  auto& k = cg.kern->get_impl();
  if (k.prog->ctx.get_impl().id != ctx.get_impl().id)
    throw error(errc::invalid_argument, "handler::parallel_for",
                "kernel '" + k.name + "' was built for another context than the queue's");
  if (cg.arg_count != k.num_args)
    throw error(errc::invalid_argument, "handler::parallel_for",
                "kernel '" + k.name + "' takes " + std::to_string(k.num_args) + " arguments; " +
                    std::to_string(cg.arg_count) + " were given");
  auto& r = cg.range;
  if (r.dims < 1 || r.dims > 3)
    throw error(errc::invalid_argument, "handler::parallel_for",
                std::string("nd_range has ") + std::to_string(r.dims) + " dims");
  std::lock_guard lock(k.mutex);
  for (cl_uint i = 0; i < cg.arg_count; ++i) {
    auto& a = cg.args[i];
    if (a.k == detail::kernel_arg::kind::usm && !a.object)
      throw error(
          errc::invalid_argument, "handler::parallel_for",
          std::string("argument ") + std::to_string(i) + " of kernel '" + k.name + "' is a null device_ptr");
    const cl_int st = detail::set_kernel_arg(k.k, i, a);
    if (st != CL_SUCCESS)
      detail::throw_cl(st, "clSetKernelArg",
                       std::string("argument ") + std::to_string(i) + " of kernel '" + k.name + "'");
  }
  cl_int st = clEnqueueNDRangeKernel(cq, k.k, r.dims, nullptr, r.global.data(),
                                     r.has_local ? r.local.data() : nullptr, wl.size(), wl.data(), out);
  if (st != CL_SUCCESS) {
    // std::string(...) + ...: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
    std::string shape = std::string("global ") + std::to_string(r.global[0]);
    for (unsigned i = 1; i < r.dims; ++i) shape += std::string("x") + std::to_string(r.global[i]);
    if (r.has_local) {
      shape += std::string(", local ") + std::to_string(r.local[0]);
      for (unsigned i = 1; i < r.dims; ++i) shape += std::string("x") + std::to_string(r.local[i]);
    }
    detail::throw_cl(st, "clEnqueueNDRangeKernel", "kernel '" + k.name + "', " + shape);
  }
}

/// Completes a host task's user event once its dependencies are done.
void launch_host_task(std::function<void()> fn, cl_event user, std::vector<cl_event> deps,
                      std::weak_ptr<queue::impl> q, std::weak_ptr<event::impl> self) {
  detail::run_on_worker(
      [fn = std::move(fn), user, deps = std::move(deps), q = std::move(q), self = std::move(self)] {
        try {
          for (auto d : deps) detail::wait_event(d, "host_task dependency");
          fn();
        } catch (...) {
          if (auto e = self.lock()) e->host_failed = true;
          detail::report_async(q, std::current_exception());
        }
        for (auto d : deps) clReleaseEvent(d);
        // Completes even after a failure: OpenCL leaves commands waiting on a failed event undefined
        // (PoCL never runs them), and SYCL runs a failed host task's dependents.
        clSetUserEventStatus(user, CL_COMPLETE);
        clReleaseEvent(user);
      });
}

}  // namespace

event queue::submit_group(detail::command_group& cg) {
  auto& q = get_impl();
  if (q.recording.load(std::memory_order_acquire)) {
    detail::record_group(q, cg);
    return event{};
  }
  auto& ctx_impl = q.ctx.get_impl();
  locked_requirements reqs;
  for (auto& r : cg.requirements) {
    if (r.buf->ctx.get_impl().id != ctx_impl.id)
      throw error(errc::invalid_argument, "queue::submit",
                  "a buffer of context " + std::to_string(r.buf->ctx.get_impl().id) +
                      " was used on a queue of context " + std::to_string(ctx_impl.id));
    reqs.add(r.buf.get(), r.mode, r.begin, r.end);
  }

  std::lock_guard qlock(q.mutex);
  reqs.lock();

  // Dependencies: explicit ones, then RAW / WAR / WAW from each buffer's state.
  const event::impl* dep_inline[16];
  std::vector<const event::impl*> dep_more;
  std::size_t ndeps = 0;
  auto add_dep = [&](const event::impl* e) {
    if (!e || !e->ev) return;
    const event::impl* const* seen = ndeps <= 16 ? dep_inline : dep_more.data();
    for (std::size_t i = 0; i < ndeps; ++i)
      if (seen[i] == e) return;  // one event can own several segments
    if (ndeps < 16) {
      dep_inline[ndeps++] = e;
    } else {
      if (dep_more.empty()) dep_more.assign(dep_inline, dep_inline + 16);
      dep_more.push_back(e);
      ++ndeps;
    }
  };
  for (auto& e : cg.depends) add_dep(e.get_impl());
  // In declaration order: the last accessor's dependency picks the lane (see choose_lane). Only
  // segments overlapping the accessed bytes count.
  auto* entries = reqs.data();
  for (std::size_t i = 0; i < reqs.n; ++i) {
    const auto& r = entries[i];
    for (auto& w : r.buf->writers)
      if (w.begin < r.end && r.begin < w.end) add_dep(w.ev.get());  // RAW, WAW
    if (writes(r.mode))
      for (auto& reader : r.buf->readers)
        if (reader.begin < r.end && r.begin < reader.end) add_dep(reader.ev.get());  // WAR
  }
  const event::impl* const* deps = ndeps <= 16 ? dep_inline : dep_more.data();

  const bool host = cg.kind == detail::command_kind::host_task;
  detail::lane* lane = nullptr;
  if (!host || q.options.in_order) lane = &choose_lane(q, deps, ndeps);

  detail::wait_list wl;
  for (std::size_t i = 0; i < ndeps; ++i) wl.add(deps[i], lane && !host ? lane->id : 0);
  if (lane && lane->pending_foreign) wl.add(lane->pending_foreign.get());
  if (host && lane) wl.add(lane->last.get());  // an in-order queue's host task follows its last command

  auto ev = std::make_shared<event::impl>();
  ev->profiling = q.options.enable_profiling;
  ev->owner = q.weak_from_this();
  for (std::size_t i = 0; i < ndeps; ++i) ev->deps.add(deps[i]->ev);
  cl_event out = nullptr;
  cl_command_queue cq = lane ? lane->cq : nullptr;

  switch (cg.kind) {
    case detail::command_kind::kernel:
      if (!cg.kern || !*cg.kern) throw error(errc::invalid_argument, "handler::parallel_for", "empty kernel");
      if (cg.range.global_size() == 0) {
        detail::check_cl(clEnqueueMarkerWithWaitList(cq, wl.size(), wl.data(), &out),
                         "clEnqueueMarkerWithWaitList");
      } else {
        enqueue_kernel(cg, cq, wl, &out, q.ctx);
      }
      break;
    case detail::command_kind::copy: {
      detail::check_buffer_range(cg.src, cg.src_offset, cg.bytes, "handler::copy (source)");
      detail::check_buffer_range(cg.dst, cg.dst_offset, cg.bytes, "handler::copy (destination)");
      if (cg.bytes == 0) {
        detail::check_cl(clEnqueueMarkerWithWaitList(cq, wl.size(), wl.data(), &out),
                         "clEnqueueMarkerWithWaitList");
      } else {
        detail::check_cl(clEnqueueCopyBuffer(cq, cg.src->mem, cg.dst->mem, cg.src_offset, cg.dst_offset,
                                             cg.bytes, wl.size(), wl.data(), &out),
                         "clEnqueueCopyBuffer", std::to_string(cg.bytes) + " bytes");
      }
      break;
    }
    case detail::command_kind::fill: {
      detail::check_buffer_range(cg.dst, cg.dst_offset, cg.bytes, "handler::fill");
      detail::check_pattern_size(cg.pattern_size, "handler::fill");
      if (cg.bytes == 0) {
        detail::check_cl(clEnqueueMarkerWithWaitList(cq, wl.size(), wl.data(), &out),
                         "clEnqueueMarkerWithWaitList");
      } else {
        detail::check_cl(clEnqueueFillBuffer(cq, cg.dst->mem, cg.pattern, cg.pattern_size, cg.dst_offset,
                                             cg.bytes, wl.size(), wl.data(), &out),
                         "clEnqueueFillBuffer", std::to_string(cg.bytes) + " bytes");
      }
      break;
    }
    case detail::command_kind::host_write:
    case detail::command_kind::host_read: {
      const bool read = cg.kind == detail::command_kind::host_read;
      const char* what = read ? "handler::copy_to_host" : "handler::copy_from_host";
      detail::buffer_impl* dev = read ? cg.src : cg.dst;
      const std::size_t off = read ? cg.src_offset : cg.dst_offset;
      detail::check_buffer_range(dev, off, cg.bytes, what);
      if (cg.bytes && !(read ? cg.host_dst : cg.host_src))
        throw error(errc::invalid_argument, what, read ? "null destination pointer" : "null source pointer");
      if (cg.bytes == 0) {
        detail::check_cl(clEnqueueMarkerWithWaitList(cq, wl.size(), wl.data(), &out),
                         "clEnqueueMarkerWithWaitList");
      } else if (read) {
        detail::check_cl(clEnqueueReadBuffer(cq, dev->mem, CL_FALSE, off, cg.bytes, cg.host_dst, wl.size(),
                                             wl.data(), &out),
                         "clEnqueueReadBuffer", std::to_string(cg.bytes) + " bytes");
      } else {
        detail::check_cl(clEnqueueWriteBuffer(cq, dev->mem, CL_FALSE, off, cg.bytes, cg.host_src, wl.size(),
                                              wl.data(), &out),
                         "clEnqueueWriteBuffer", std::to_string(cg.bytes) + " bytes");
      }
      break;
    }
    case detail::command_kind::host_task: {
      if (!cg.host_fn) throw error(errc::invalid_argument, "handler::host_task", "empty function");
      cl_int st = CL_SUCCESS;
      out = clCreateUserEvent(ctx_impl.ctx, &st);
      detail::check_cl(st, "clCreateUserEvent");
      ev->host_task = true;
      std::vector<cl_event> wait(wl.data(), wl.data() + wl.size());
      for (auto e : wait) clRetainEvent(e);
      clRetainEvent(out);  // released by the worker once it set the status
      launch_host_task(std::move(cg.host_fn), out, std::move(wait), ev->owner, ev);
      break;
    }
    case detail::command_kind::native: {
      detail::native_args args;
      args.queue = cq;
      args.wait_list.assign(wl.data(), wl.data() + wl.size());
      args.mem_of = &mem_of_buffer;
      void* r = cg.native_fn(args);
      if (r) {
        out = static_cast<cl_event>(r);
        clRetainEvent(out);
      } else {
        // The native command enqueued nothing visible: a marker keeps ordering intact.
        detail::check_cl(clEnqueueMarkerWithWaitList(cq, wl.size(), wl.data(), &out),
                         "clEnqueueMarkerWithWaitList");
      }
      break;
    }
    case detail::command_kind::none:
      detail::check_cl(clEnqueueMarkerWithWaitList(cq, wl.size(), wl.data(), &out),
                       "clEnqueueMarkerWithWaitList");
      break;
  }
  ev->ev = out;
  if (!host) ev->lane_id = lane->id;

  // New buffer state: this command is the last writer, or one more reader.
  for (std::size_t i = 0; i < reqs.n; ++i) {
    const auto& r = entries[i];
    if (r.begin == r.end) continue;  // an empty range orders against nothing
    if (writes(r.mode))
      detail::set_writer(*r.buf, ev, r.begin, r.end);
    else
      detail::add_reader(*r.buf, ev, r.begin, r.end);
  }
  if (host) {
    if (lane) lane->pending_foreign = ev;
  } else {
    lane->last = ev;
    lane->pending_foreign.reset();
  }
  if (q.since_wait.size() >= 4096) prune_finished(q);
  q.since_wait.push_back(ev);
  return event(std::move(ev));
}

namespace detail {
lane& pick_lane(queue::impl& q, const event::impl* const* deps, std::size_t n) {
  return choose_lane(q, deps, n);
}
void track_submitted(queue::impl& q, std::shared_ptr<event::impl> ev) {
  if (q.since_wait.size() >= 4096) prune_finished(q);
  q.since_wait.push_back(std::move(ev));
}
cl_int set_kernel_arg(cl_kernel k, cl_uint i, const kernel_arg& a) {
  switch (a.k) {
    case kernel_arg::kind::value:
      return clSetKernelArg(k, i, a.size, a.bytes);
    case kernel_arg::kind::local:
      return clSetKernelArg(k, i, a.size, nullptr);
    case kernel_arg::kind::buffer: {
      cl_mem m = static_cast<const buffer_impl*>(a.object)->mem;
      return clSetKernelArg(k, i, sizeof(cl_mem), &m);
    }
    case kernel_arg::kind::usm: {
      auto* u = static_cast<const usm_alloc*>(a.object);
      return u->kind == usm_kind::svm ? clSetKernelArgSVMPointer(k, i, u->svm)
                                      : clSetKernelArg(k, i, sizeof(cl_mem), &u->mem);
    }
  }
  return CL_INVALID_ARG_VALUE;
}
void check_pattern_size(std::size_t s, const char* what) {
  if (s != 1 && s != 2 && s != 4 && s != 8 && s != 16 && s != 32 && s != 64 && s != 128)
    throw error(errc::invalid_argument, what,
                "element size " + std::to_string(s) + " is not 1, 2, 4, 8, 16, 32, 64 or 128 bytes");
}
void check_range(std::size_t size, std::size_t off, std::size_t bytes, const char* what, const char* of) {
  if (off > size || bytes > size - off)
    throw error(errc::invalid_argument, what,
                "range [" + std::to_string(off) + ", " + std::to_string(off + bytes) + ") is outside " + of +
                    " of " + std::to_string(size) + " bytes");
}
void check_buffer_range(const buffer_impl* b, std::size_t off, std::size_t bytes, const char* what) {
  if (!b) throw error(errc::invalid_argument, what, "null buffer");
  check_range(b->bytes, off, bytes, what, "a buffer");
}
}  // namespace detail

void handler::submit_now() {
  submitted_ = queue_->submit_group(cg_);
  done_ = true;
}

// USM transfers: no buffer tracking; ordering is the lane's (in-order) or `deps`.
namespace {
struct usm_target {
  cl_command_queue cq = nullptr;
  detail::wait_list wl;
  std::shared_ptr<event::impl> ev;
  detail::lane* lane = nullptr;
};
}  // namespace

static void usm_prepare(queue::impl& q, const std::vector<event>& deps, usm_target& t) {
  const event::impl* d[16];
  std::size_t n = 0;
  for (auto& e : deps)
    if (e && n < 16) d[n++] = e.get_impl();
  t.lane = &choose_lane(q, d, n);
  for (auto& e : deps) t.wl.add(e.get_impl(), t.lane->id);
  if (t.lane->pending_foreign) t.wl.add(t.lane->pending_foreign.get());
  t.cq = t.lane->cq;
  t.ev = std::make_shared<event::impl>();
  t.ev->profiling = q.options.enable_profiling;
  t.ev->owner = q.weak_from_this();
  for (auto& e : deps)
    if (e && e.get_impl()->ev) t.ev->deps.add(e.get_impl()->ev);
}

static event usm_finish(queue::impl& q, usm_target& t, cl_event out) {
  t.ev->ev = out;
  t.ev->lane_id = t.lane->id;
  t.lane->last = t.ev;
  t.lane->pending_foreign.reset();
  if (q.since_wait.size() >= 4096) prune_finished(q);
  q.since_wait.push_back(t.ev);
  return event(std::move(t.ev));
}

static void check_usm_range(const detail::usm_alloc* a, std::size_t off, std::size_t bytes,
                            const char* what) {
  if (!a) throw error(errc::invalid_argument, what, "null device_ptr");
  detail::check_range(a->bytes, off, bytes, what, "an allocation");
}

event queue::usm_copy(detail::usm_alloc* dst, std::size_t dst_off, detail::usm_alloc* src,
                      std::size_t src_off, void* host_dst, const void* host_src, std::size_t bytes,
                      const std::vector<event>& deps) {
  auto& q = get_impl();
  if (dst) check_usm_range(dst, dst_off, bytes, "queue::memcpy (destination)");
  if (src) check_usm_range(src, src_off, bytes, "queue::memcpy (source)");
  if ((dst && dst->ctx.get_impl().id != q.ctx.get_impl().id) ||
      (src && src->ctx.get_impl().id != q.ctx.get_impl().id))
    throw error(errc::invalid_argument, "queue::memcpy",
                "the allocation belongs to another context than the queue's");
  if ((!dst && !host_dst) || (!src && !host_src))
    throw error(errc::invalid_argument, "queue::memcpy", "null source or destination pointer");
  if (q.recording.load(std::memory_order_acquire))
    throw error(errc::invalid_argument, "queue::memcpy",
                "a USM transfer cannot be recorded in a graph (queue " + std::to_string(q.id) +
                    " is recording); do it between replays, or use buffers and handler::copy");
  std::lock_guard lock(q.mutex);
  usm_target t;
  usm_prepare(q, deps, t);
  cl_event out = nullptr;
  cl_int st = CL_SUCCESS;
  auto svm_ptr = [](detail::usm_alloc* a, std::size_t off) { return static_cast<char*>(a->svm) + off; };
  if (bytes == 0) {
    st = clEnqueueMarkerWithWaitList(t.cq, t.wl.size(), t.wl.data(), &out);
  } else if (dst && src && dst->kind == usm_kind::device && src->kind == usm_kind::device) {
    st = clEnqueueCopyBuffer(t.cq, src->mem, dst->mem, src_off, dst_off, bytes, t.wl.size(), t.wl.data(),
                             &out);
  } else if (dst && dst->kind == usm_kind::device) {
    const void* from = src ? svm_ptr(src, src_off) : host_src;
    st = clEnqueueWriteBuffer(t.cq, dst->mem, CL_FALSE, dst_off, bytes, from, t.wl.size(), t.wl.data(), &out);
  } else if (src && src->kind == usm_kind::device) {
    void* to = dst ? svm_ptr(dst, dst_off) : host_dst;
    st = clEnqueueReadBuffer(t.cq, src->mem, CL_FALSE, src_off, bytes, to, t.wl.size(), t.wl.data(), &out);
  } else {
    void* to = dst ? svm_ptr(dst, dst_off) : host_dst;
    const void* from = src ? svm_ptr(src, src_off) : host_src;
    st = clEnqueueSVMMemcpy(t.cq, CL_FALSE, to, from, bytes, t.wl.size(), t.wl.data(), &out);
  }
  detail::check_cl(st, "queue::memcpy", std::to_string(bytes) + " bytes");
  return usm_finish(q, t, out);
}

event queue::usm_fill(detail::usm_alloc* dst, std::size_t off, const void* pattern, std::size_t pattern_size,
                      std::size_t bytes, const std::vector<event>& deps) {
  auto& q = get_impl();
  check_usm_range(dst, off, bytes, "queue::fill");
  detail::check_pattern_size(pattern_size, "queue::fill");
  if (q.recording.load(std::memory_order_acquire))
    throw error(errc::invalid_argument, "queue::fill",
                "a USM fill cannot be recorded in a graph (queue " + std::to_string(q.id) +
                    " is recording); do it between replays, or use buffers and handler::fill");
  std::lock_guard lock(q.mutex);
  usm_target t;
  usm_prepare(q, deps, t);
  cl_event out = nullptr;
  cl_int st = CL_SUCCESS;
  if (bytes == 0)
    st = clEnqueueMarkerWithWaitList(t.cq, t.wl.size(), t.wl.data(), &out);
  else if (dst->kind == usm_kind::svm)
    st = clEnqueueSVMMemFill(t.cq, static_cast<char*>(dst->svm) + off, pattern, pattern_size, bytes,
                             t.wl.size(), t.wl.data(), &out);
  else
    st = clEnqueueFillBuffer(t.cq, dst->mem, pattern, pattern_size, off, bytes, t.wl.size(), t.wl.data(),
                             &out);
  detail::check_cl(st, "queue::fill", std::to_string(bytes) + " bytes");
  return usm_finish(q, t, out);
}

namespace {
/// Waits for everything submitted so far; returns the failures found.
std::vector<std::exception_ptr> finish(queue::impl& q) {
  if (q.recording.load(std::memory_order_acquire))
    throw error(errc::invalid_argument, "queue::wait",
                "queue " + std::to_string(q.id) +
                    " is recording a graph: nothing recorded has run, so a wait cannot be recorded; end the "
                    "recording first");
  std::vector<std::shared_ptr<event::impl>> events;
  std::vector<cl_command_queue> lanes;
  {
    std::lock_guard lock(q.mutex);
    events.swap(q.since_wait);
    q.since_wait.reserve(256);
    for (auto& l : q.lanes) lanes.push_back(l.cq);
  }
  // Lane commands complete with their lane; host tasks and native commands are waited for alone.
  for (auto cq : lanes) clFinish(cq);
  std::vector<std::exception_ptr> failed;
  for (auto& e : events) {
    if (!e->ev) continue;
    cl_int s = CL_COMPLETE;
    clGetEventInfo(e->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, nullptr);
    if (s > CL_COMPLETE) {
      clWaitForEvents(1, &e->ev);
      clGetEventInfo(e->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, nullptr);
    }
    if (s < 0 && !e->host_task && !e->reported.exchange(true))
      failed.push_back(std::make_exception_ptr(error(errc::async_error, "queue " + std::to_string(q.id),
                                                     std::string(e->host_task ? "a host task" : "a command") +
                                                         " failed on " + q.dev.name() + " with status " +
                                                         std::to_string(s),
                                                     e->host_task ? 0 : s)));
  }
  return failed;
}

std::vector<std::exception_ptr> take_async(queue::impl& q, std::vector<std::exception_ptr> found) {
  std::vector<std::exception_ptr> all;
  {
    std::lock_guard lock(q.async_mutex);
    all.swap(q.async_errors);
  }
  // A host task that threw was reported with its own exception; its failed event is not repeated.
  for (auto& f : found) all.push_back(std::move(f));
  auto& c = q.ctx.get_impl();
  std::lock_guard lock(c.notify_mutex);
  for (; q.notifications_seen < c.notifications.size(); ++q.notifications_seen)
    all.push_back(std::make_exception_ptr(
        error(errc::async_error, "OpenCL context notification", c.notifications[q.notifications_seen])));
  return all;
}

void deliver(queue::impl& q, std::vector<std::exception_ptr> errors) {
  if (errors.empty()) return;
  if (q.options.on_async_error) {
    q.options.on_async_error(errors);
    return;
  }
  for (auto& e : errors) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      log::get("runtime")->error("queue {}: asynchronous error: {}", q.id, ex.what());
    } catch (...) {
      log::get("runtime")->error("queue {}: asynchronous non-standard error", q.id);
    }
  }
  std::rethrow_exception(errors.front());
}
}  // namespace

void queue::wait() {
  auto& q = get_impl();
  auto found = finish(q);
  if (q.options.on_async_error) {  // kept for wait_and_throw / throw_asynchronous
    std::lock_guard lock(q.async_mutex);
    for (auto& f : found) q.async_errors.push_back(std::move(f));
    return;
  }
  deliver(q, take_async(q, std::move(found)));
}

void queue::wait_and_throw() {
  auto& q = get_impl();
  deliver(q, take_async(q, finish(q)));
}

void queue::throw_asynchronous() {
  auto& q = get_impl();
  deliver(q, take_async(q, {}));
}

}  // namespace prism
