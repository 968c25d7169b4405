// SPDX-License-Identifier: Apache-2.0
// Events: status, waits, dependency lists, host callbacks and profiling; plus the runtime's two
// worker threads (host tasks, callbacks).
#include <chrono>

#include "runtime/impl.hpp"
#include "runtime/log.hpp"

namespace prism {
namespace detail {

void event_deps::add(cl_event e) {
  if (!e) return;
  clRetainEvent(e);
  if (count_ < inline_count)
    inline_[count_++] = e;
  else
    more_.push_back(e);
}
event_deps::~event_deps() {
  for_each([](cl_event e) { clReleaseEvent(e); });
}

event_status status_of(cl_event e) {
  if (!e) return event_status::complete;
  cl_int s = CL_COMPLETE;
  if (clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, nullptr) != CL_SUCCESS)
    return event_status::failed;
  if (s < 0) return event_status::failed;
  switch (s) {
    case CL_COMPLETE:
      return event_status::complete;
    case CL_RUNNING:
      return event_status::running;
    default:
      return event_status::submitted;
  }
}

void wait_event(cl_event e, const char* operation) {
  if (!e) return;
  cl_int st = clWaitForEvents(1, &e);
  cl_int s = CL_COMPLETE;
  clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof s, &s, nullptr);
  if (st != CL_SUCCESS || s < 0)
    throw error(
        errc::async_error, operation,
        "the command failed with execution status " + std::to_string(s) + " (" + cl_error_name(s) + ")",
        st != CL_SUCCESS ? st : s);
}

namespace {
/// A FIFO of jobs run by one thread. Never destroyed; the thread is detached.
class worker {
 public:
  explicit worker(const char* name) : name_(name) {
    std::thread([this] { loop(); }).detach();
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      try {
        job();
      } catch (const std::exception& e) {
        log::get("runtime")->error("{} thread: uncaught exception: {}", name_, e.what());
      } catch (...) {
        log::get("runtime")->error("{} thread: uncaught non-standard exception", name_);
      }
    }
  }
  const char* name_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
};
}  // namespace

void run_on_worker(std::function<void()> fn) {
  static auto* w = new worker("host-task");
  w->post(std::move(fn));
}
void run_on_callback_thread(std::function<void()> fn) {
  static auto* w = new worker("callback");
  w->post(std::move(fn));
}

void report_async(const std::weak_ptr<queue::impl>& q, std::exception_ptr e) {
  if (auto qi = q.lock()) {
    std::lock_guard lock(qi->async_mutex);
    qi->async_errors.push_back(std::move(e));
    return;
  }
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log::get("runtime")->error("asynchronous error after its queue was destroyed: {}", ex.what());
  } catch (...) {
    log::get("runtime")->error("asynchronous non-standard error after its queue was destroyed");
  }
}

}  // namespace detail

event::impl::~impl() {
  if (ev) clReleaseEvent(ev);
}

void event::wait() const {
  if (impl_) detail::wait_event(impl_->ev, "event::wait");
}

void event::wait(const std::vector<event>& events) {
  for (auto& e : events) e.wait();
}

event_status event::status() const {
  if (!impl_) return event_status::complete;
  auto s = detail::status_of(impl_->ev);
  return s == event_status::complete && impl_->host_failed ? event_status::failed : s;
}

std::vector<event> event::dependencies() const {
  std::vector<event> out;
  if (!impl_) return out;
  impl_->deps.for_each([&](cl_event e) {
    auto d = std::make_shared<impl>();
    clRetainEvent(e);
    d->ev = e;
    cl_command_queue q = nullptr;
    if (clGetEventInfo(e, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, nullptr) == CL_SUCCESS && q) {
      cl_command_queue_properties p = 0;
      clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof p, &p, nullptr);
      d->profiling = (p & CL_QUEUE_PROFILING_ENABLE) != 0;
    }
    out.emplace_back(std::move(d));
  });
  return out;
}

namespace {
struct callback_data {
  std::function<void(event_status)> fn;
  std::weak_ptr<queue::impl> owner;
  std::weak_ptr<event::impl> self;  ///< a failed host task completes its user event anyway
};
void run_callback(std::shared_ptr<callback_data> data, event_status st) {
  detail::run_on_callback_thread([data = std::move(data), st] {
    try {
      data->fn(st);
    } catch (...) {
      try {
        throw;
      } catch (const std::exception& e) {
        log::get("runtime")->error("event callback threw: {}", e.what());
      } catch (...) {
        log::get("runtime")->error("event callback threw a non-standard exception");
      }
      detail::report_async(data->owner, std::current_exception());
    }
  });
}
void CL_CALLBACK on_event_done(cl_event, cl_int status, void* user) {
  std::unique_ptr<std::shared_ptr<callback_data>> data(static_cast<std::shared_ptr<callback_data>*>(user));
  auto self = (*data)->self.lock();
  bool failed = status < 0 || (self && self->host_failed);
  run_callback(std::move(*data), failed ? event_status::failed : event_status::complete);
}
}  // namespace

void event::then(std::function<void(event_status)> callback) const {
  if (!callback) throw error(errc::invalid_argument, "event::then", "empty callback");
  auto data = std::make_shared<callback_data>();
  data->fn = std::move(callback);
  if (!impl_ || !impl_->ev) {
    run_callback(std::move(data), event_status::complete);
    return;
  }
  data->owner = impl_->owner;
  data->self = impl_;
  auto* boxed = new std::shared_ptr<callback_data>(data);
  cl_int st = clSetEventCallback(impl_->ev, CL_COMPLETE, &on_event_done, boxed);
  if (st != CL_SUCCESS) {
    delete boxed;
    detail::throw_cl(st, "clSetEventCallback");
  }
  // The command must reach the device for its callback to fire.
  cl_command_queue q = nullptr;
  if (clGetEventInfo(impl_->ev, CL_EVENT_COMMAND_QUEUE, sizeof q, &q, nullptr) == CL_SUCCESS && q) clFlush(q);
}

profiling_info event::profiling() const {
  if (!impl_ || !impl_->ev)
    throw error(errc::unsupported, "event::profiling", "a default-constructed event has no timestamps");
  if (impl_->host_task)
    throw error(errc::unsupported, "event::profiling", "host tasks have no device timestamps");
  if (!impl_->profiling)
    throw error(errc::unsupported, "event::profiling",
                "the queue of this command did not enable profiling (queue_options::enable_profiling)");
  detail::wait_event(impl_->ev, "event::profiling");
  profiling_info p;
  auto get = [&](cl_profiling_info what, std::uint64_t& out) {
    cl_ulong v = 0;
    detail::check_cl(clGetEventProfilingInfo(impl_->ev, what, sizeof v, &v, nullptr),
                     "clGetEventProfilingInfo");
    out = v;
  };
  get(CL_PROFILING_COMMAND_QUEUED, p.queued_ns);
  get(CL_PROFILING_COMMAND_SUBMIT, p.submit_ns);
  get(CL_PROFILING_COMMAND_START, p.start_ns);
  get(CL_PROFILING_COMMAND_END, p.end_ns);
  return p;
}

}  // namespace prism
