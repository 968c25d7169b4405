// SPDX-License-Identifier: Apache-2.0
// Contexts: one default per device (created on first use, never released) plus explicit ones.
#include <map>

#include "runtime/impl.hpp"
#include "runtime/log.hpp"

namespace prism {

std::uint64_t next_object_id() {
  static std::atomic<std::uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

namespace {
void CL_CALLBACK context_notify(const char* errinfo, const void*, size_t, void* user) {
  auto* c = static_cast<context::impl*>(user);
  log::get("runtime")->error("OpenCL context {} reported: {}", c->id, errinfo ? errinfo : "");
  std::lock_guard lock(c->notify_mutex);
  c->notifications.emplace_back(errinfo ? errinfo : "");
}

std::shared_ptr<context::impl> create_context(const device& dev) {
  auto c = std::make_shared<context::impl>();
  c->dev = dev;
  c->id = next_object_id();
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(dev.get_impl().platform), 0};
  cl_int st = CL_SUCCESS;
  cl_device_id id = dev.get_impl().id;
  c->ctx = clCreateContext(props, 1, &id, &context_notify, c.get(), &st);
  detail::check_cl(st, "clCreateContext", "device " + dev.name());
  log::get("runtime")->debug("context {} created for {}", c->id, dev.name());
  return c;
}
}  // namespace

cl_command_queue context::impl::get_io_queue() {
  std::lock_guard lock(io_mutex);
  if (!io_queue) {
    cl_int st = CL_SUCCESS;
    io_queue = clCreateCommandQueueWithProperties(ctx, dev.get_impl().id, nullptr, &st);
    detail::check_cl(st, "clCreateCommandQueue", "transfer queue of " + dev.name());
  }
  return io_queue;
}

context::impl::~impl() {
  if (io_queue) {
    clFinish(io_queue);
    clReleaseCommandQueue(io_queue);
  }
  if (ctx) clReleaseContext(ctx);
}

context::context(const device& dev) : impl_(create_context(dev)) {}

context context::get_default(const device& dev) {
  struct defaults {
    std::mutex mutex;
    std::map<cl_device_id, context> by_device;
  };
  static auto* d = new defaults;  // never destroyed: contexts must outlive every static user
  std::lock_guard lock(d->mutex);
  auto id = dev.get_impl().id;
  auto it = d->by_device.find(id);
  if (it != d->by_device.end()) return it->second;
  context c(create_context(dev));
  d->by_device.emplace(id, c);
  return c;
}

context::impl& context::get_impl() const {
  if (!impl_)
    throw error(errc::invalid_argument, "prism::context", "use of a default-constructed (empty) context");
  return *impl_;
}
const device& context::get_device() const {
  return get_impl().dev;
}
std::uint64_t context::id() const {
  return get_impl().id;
}

}  // namespace prism
