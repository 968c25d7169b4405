// SPDX-License-Identifier: Apache-2.0
// Graphs: recording command groups on a queue (queue::submit hands them here while a graph
// records), resolving them into a launch list or a cl_khr_command_buffer, and replaying them as
// one tracked unit. Also graph_param's staging slots and the process-wide graph counters.
#include <algorithm>
#include <unordered_map>

#include "runtime/impl.hpp"
#include "runtime/log.hpp"
#include "runtime/sync.hpp"

namespace prism {
namespace {

std::atomic<std::uint64_t> total_graphs{0}, total_commands{0}, total_replays{0}, total_commands_replayed{0};

/// The graph this thread records into, for refusing blocking operations inside a recording.
thread_local std::weak_ptr<graph::impl> recording_here;

bool writes(access_mode m) {
  return m != access_mode::read;
}

/// Whether `e` (possibly null) is queued, submitted or running: not complete, not failed.
bool pending(cl_event e) {
  cl_int status = CL_COMPLETE;
  if (!e ||
      clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr) != CL_SUCCESS)
    return false;
  return status > CL_COMPLETE;
}

/// cl_khr_command_buffer entry points, loaded per platform.
struct command_buffer_api {
  clCreateCommandBufferKHR_fn create = nullptr;
  clFinalizeCommandBufferKHR_fn finalize = nullptr;
  clReleaseCommandBufferKHR_fn release = nullptr;
  clEnqueueCommandBufferKHR_fn enqueue = nullptr;
  clCommandNDRangeKernelKHR_fn ndrange = nullptr;
  clCommandCopyBufferKHR_fn copy = nullptr;
  clCommandFillBufferKHR_fn fill = nullptr;
  bool complete() const { return create && finalize && release && enqueue && ndrange && copy && fill; }
};

command_buffer_api load_command_buffer_api(const device::impl& d) {
  command_buffer_api api;
  if (std::find(d.extensions.begin(), d.extensions.end(), "cl_khr_command_buffer") == d.extensions.end())
    return api;
  auto get = [&](const char* name) { return clGetExtensionFunctionAddressForPlatform(d.platform, name); };
  api.create = reinterpret_cast<clCreateCommandBufferKHR_fn>(get("clCreateCommandBufferKHR"));
  api.finalize = reinterpret_cast<clFinalizeCommandBufferKHR_fn>(get("clFinalizeCommandBufferKHR"));
  api.release = reinterpret_cast<clReleaseCommandBufferKHR_fn>(get("clReleaseCommandBufferKHR"));
  api.enqueue = reinterpret_cast<clEnqueueCommandBufferKHR_fn>(get("clEnqueueCommandBufferKHR"));
  api.ndrange = reinterpret_cast<clCommandNDRangeKernelKHR_fn>(get("clCommandNDRangeKernelKHR"));
  api.copy = reinterpret_cast<clCommandCopyBufferKHR_fn>(get("clCommandCopyBufferKHR"));
  api.fill = reinterpret_cast<clCommandFillBufferKHR_fn>(get("clCommandFillBufferKHR"));
  return api;
}

}  // namespace

const char* graph_mode_name(graph_mode m) noexcept {
  switch (m) {
    case graph_mode::automatic:
      return "automatic";
    case graph_mode::launch_list:
      return "launch_list";
    case graph_mode::command_buffer:
      return "command_buffer";
  }
  return "unknown";
}

graph_totals graph_counters() noexcept {
  return {total_graphs.load(), total_commands.load(), total_replays.load(), total_commands_replayed.load()};
}

namespace detail {
const char* command_kind_name(command_kind k) noexcept {
  switch (k) {
    case command_kind::none:
      return "an empty command group";
    case command_kind::kernel:
      return "handler::parallel_for";
    case command_kind::copy:
      return "handler::copy";
    case command_kind::fill:
      return "handler::fill";
    case command_kind::host_task:
      return "handler::host_task";
    case command_kind::native:
      return "interop::enqueue_native";
    case command_kind::host_write:
      return "handler::copy_from_host (graph_param::set)";
    case command_kind::host_read:
      return "handler::copy_to_host";
  }
  return "unknown command";
}
}  // namespace detail

struct graph::impl {
  /// One recorded command, with everything a replay needs already resolved.
  struct node {
    detail::command_kind kind = detail::command_kind::kernel;
    cl_kernel k = nullptr;  ///< a clone owned by the graph, its arguments set once
    std::shared_ptr<program::impl> prog;
    std::string name;
    cl_uint dims = 1;
    std::size_t global[3] = {1, 1, 1}, local[3] = {1, 1, 1};
    bool has_local = false;
    cl_mem src = nullptr, dst = nullptr;
    std::size_t src_offset = 0, dst_offset = 0, bytes = 0;
    alignas(16) unsigned char pattern[64];
    std::size_t pattern_size = 0;
  };
  /// A buffer the graph uses: modes merged and ranges widened over its commands.
  struct use {
    std::weak_ptr<detail::buffer_impl> buf;
    detail::buffer_impl* raw = nullptr;
    access_mode mode = access_mode::read;
    std::size_t begin = 0, end = 0;
    std::string first_user;
  };
  struct usm_use {
    std::weak_ptr<detail::usm_alloc> alloc;
    std::string first_user;
  };

  std::mutex mutex;
  graph_options options;
  graph_mode mode = graph_mode::launch_list;
  context ctx;
  std::weak_ptr<queue::impl> recording_queue;
  std::atomic<bool> recording{false};  ///< read by replays and by other threads' recording checks
  std::vector<node> nodes;
  std::vector<use> uses;
  std::unordered_map<detail::buffer_impl*, std::size_t> use_index;
  std::vector<usm_use> usms;
  /// Buffers created while recording (op outputs, temporaries, workspaces) belong to the graph,
  /// as a CUDA graph owns the allocations made during its capture.
  std::uint64_t first_owned_serial = 0;
  std::vector<std::shared_ptr<detail::buffer_impl>> owned;
  std::uint64_t replays = 0;
  command_buffer_api cb_api;
  cl_command_buffer_khr cmdbuf = nullptr;
  cl_command_queue cmdbuf_queue = nullptr;  ///< the lane it was built for (retained)
  /// Built with CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR (the device offers it): it may be enqueued
  /// again while an earlier enqueue is pending. Without it, a replay queued behind a pending one
  /// goes through the launch list (the extension refuses a pending command buffer).
  bool cmdbuf_simultaneous = false;
  cl_event cmdbuf_last = nullptr;  ///< the last command-buffer enqueue (retained)
  // Replay scratch, kept to avoid per-replay allocations.
  std::vector<std::shared_ptr<detail::buffer_impl>> held;
  std::vector<std::shared_ptr<detail::usm_alloc>> held_usm;
  std::vector<std::size_t> lock_order;
  std::vector<const event::impl*> deps;

  std::string name_of(std::size_t i) const {
    const auto& n = nodes[i];
    return n.kind == detail::command_kind::kernel ? n.name : std::string(detail::command_kind_name(n.kind));
  }
  std::string describe(std::size_t i) const {
    const auto& n = nodes[i];
    std::string what = n.kind == detail::command_kind::kernel ? "kernel '" + n.name + "'" : name_of(i);
    return what + " (command " + std::to_string(i) + " of the graph)";
  }

  void record(queue::impl& q, detail::command_group& cg);
  void resolve(queue::impl& q);
  bool build_command_buffer(queue::impl& q, std::string& why);
  /// each: an event for every command (timed replays), released by the caller.
  event replay(queue::impl& q, std::vector<cl_event>* each = nullptr);

  ~impl() {
    if (cmdbuf && cb_api.release) cb_api.release(cmdbuf);
    if (cmdbuf_queue) clReleaseCommandQueue(cmdbuf_queue);
    if (cmdbuf_last) clReleaseEvent(cmdbuf_last);
    for (auto& n : nodes)
      if (n.k) clReleaseKernel(n.k);
  }
};

namespace {
[[noreturn]] void refuse(const queue::impl& q, const char* what, const std::string& why) {
  throw error(errc::invalid_argument, what,
              std::string(why) + " cannot be recorded in a graph (queue " + std::to_string(q.id) +
                  " is recording); end the recording before it, or run it between replays");
}
}  // namespace

void graph::impl::record(queue::impl& q, detail::command_group& cg) {
  using detail::command_kind;
  switch (cg.kind) {
    case command_kind::host_task:
      refuse(q, "handler::host_task", "a host task (it runs host code)");
    case command_kind::native:
      refuse(q, "interop::enqueue_native", "a native OpenCL command (its enqueue runs host code)");
    case command_kind::host_write:
      refuse(q, "handler::copy_from_host", "a copy from host memory (graph_param::set included)");
    case command_kind::host_read:
      refuse(q, "handler::copy_to_host", "a copy to host memory (its data is read between replays)");
    default:
      break;
  }
  for (auto& e : cg.depends)
    if (e && e.get_impl()->ev)
      throw error(errc::invalid_argument, "handler::depends_on",
                  "a recorded command depends on an event from outside the recording; a graph orders its "
                  "commands by recording order and against other work through its buffers");
  const std::size_t nodes_before = nodes.size();
  node n;
  n.kind = cg.kind;
  auto& ctx_impl = ctx.get_impl();
  switch (cg.kind) {
    case command_kind::kernel: {
      if (!cg.kern || !*cg.kern) throw error(errc::invalid_argument, "handler::parallel_for", "empty kernel");
      auto& k = cg.kern->get_impl();
      if (k.prog->ctx.get_impl().id != ctx_impl.id)
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
      if (r.global_size() == 0) return;  // eager runs a marker; a graph needs nothing
      cl_int st = CL_SUCCESS;
      n.k = clCreateKernel(k.prog->prog, k.name.c_str(), &st);
      detail::check_cl(st, "clCreateKernel", "graph copy of kernel '" + k.name + "'");
      n.prog = k.prog;
      n.name = k.name;
      n.dims = r.dims;
      n.has_local = r.has_local;
      for (unsigned d = 0; d < r.dims; ++d) {
        n.global[d] = r.global[d];
        n.local[d] = r.local[d];
      }
      nodes.push_back(std::move(n));  // owns the clone from here on
      auto& added = nodes.back();
      for (cl_uint i = 0; i < cg.arg_count; ++i) {
        auto& a = cg.args[i];
        if (a.k == detail::kernel_arg::kind::usm) {
          auto* u = static_cast<const detail::usm_alloc*>(a.object);
          if (!u) {
            clReleaseKernel(added.k);
            nodes.pop_back();
            throw error(errc::invalid_argument, "handler::parallel_for",
                        "argument " + std::to_string(i) + " of kernel '" + k.name + "' is a null device_ptr");
          }
          usms.push_back(
              {std::const_pointer_cast<detail::usm_alloc>(u->shared_from_this()), "kernel '" + k.name + "'"});
        }
        st = detail::set_kernel_arg(added.k, i, a);
        if (st != CL_SUCCESS) {
          clReleaseKernel(added.k);
          nodes.pop_back();
          detail::throw_cl(st, "clSetKernelArg",
                           "argument " + std::to_string(i) + " of kernel '" + k.name + "' (graph recording)");
        }
      }
      break;
    }
    case command_kind::copy:
    case command_kind::fill: {
      const bool copy = cg.kind == command_kind::copy;
      const char* what = copy ? "handler::copy" : "handler::fill";
      if (copy) detail::check_buffer_range(cg.src, cg.src_offset, cg.bytes, what);
      detail::check_buffer_range(cg.dst, cg.dst_offset, cg.bytes, what);
      if (!copy) detail::check_pattern_size(cg.pattern_size, what);
      if (cg.bytes == 0) return;
      n.src = copy ? cg.src->mem : nullptr;
      n.dst = cg.dst->mem;
      n.src_offset = cg.src_offset;
      n.dst_offset = cg.dst_offset;
      n.bytes = cg.bytes;
      std::memcpy(n.pattern, cg.pattern, sizeof n.pattern);
      n.pattern_size = cg.pattern_size;
      nodes.push_back(std::move(n));
      break;
    }
    default:
      break;  // an empty group: only its buffer uses count
  }
  std::string user =
      nodes.size() > nodes_before ? describe(nodes.size() - 1) : std::string("a command group");
  for (auto& r : cg.requirements) {
    if (r.buf->ctx.get_impl().id != ctx_impl.id)
      throw error(errc::invalid_argument, "queue::submit",
                  "a buffer of context " + std::to_string(r.buf->ctx.get_impl().id) +
                      " was used on a queue of context " + std::to_string(ctx_impl.id));
    auto [it, fresh] = use_index.try_emplace(r.buf.get(), uses.size());
    if (fresh) {
      uses.push_back({r.buf, r.buf.get(), r.mode, r.begin, r.end, user});
      if (r.buf->serial >= first_owned_serial) owned.push_back(r.buf);
    } else {
      auto& u = uses[it->second];
      if (u.mode != r.mode) u.mode = access_mode::read_write;
      u.begin = std::min(u.begin, r.begin);
      u.end = std::max(u.end, r.end);
    }
  }
}

bool graph::impl::build_command_buffer(queue::impl& q, std::string& why) {
  if (!cb_api.complete()) {
    why = "the device has no cl_khr_command_buffer";
    return false;
  }
  cl_command_queue cq = q.lanes.front().cq;
  cl_device_command_buffer_capabilities_khr caps = 0;
  if (clGetDeviceInfo(q.dev.get_impl().id, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR, sizeof caps, &caps,
                      nullptr) != CL_SUCCESS)
    caps = 0;
  const bool simultaneous = (caps & CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR) != 0;
  const cl_command_buffer_properties_khr props[] = {CL_COMMAND_BUFFER_FLAGS_KHR,
                                                    CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR, 0};
  cl_int st = CL_SUCCESS;
  cl_command_buffer_khr cb = cb_api.create(1, &cq, simultaneous ? props : nullptr, &st);
  if (st != CL_SUCCESS || !cb) {
    why = std::string("clCreateCommandBufferKHR failed: ") + cl_error_name(st);
    return false;
  }
  cl_sync_point_khr prev = 0;
  for (std::size_t i = 0; i < nodes.size() && st == CL_SUCCESS; ++i) {
    auto& n = nodes[i];
    cl_sync_point_khr sp = 0;
    const cl_uint nw = i ? 1 : 0;
    const cl_sync_point_khr* w = i ? &prev : nullptr;
    switch (n.kind) {
      case detail::command_kind::kernel:
        st = cb_api.ndrange(cb, nullptr, nullptr, n.k, n.dims, nullptr, n.global,
                            n.has_local ? n.local : nullptr, nw, w, &sp, nullptr);
        break;
      case detail::command_kind::copy:
        st = cb_api.copy(cb, nullptr, n.src, n.dst, n.src_offset, n.dst_offset, n.bytes, nw, w, &sp, nullptr);
        break;
      case detail::command_kind::fill:
        st = cb_api.fill(cb, nullptr, n.dst, n.pattern, n.pattern_size, n.dst_offset, n.bytes, nw, w, &sp,
                         nullptr);
        break;
      default:
        break;
    }
    if (st != CL_SUCCESS) why = "recording " + describe(i) + " failed: " + cl_error_name(st);
    prev = sp;
  }
  if (st == CL_SUCCESS) {
    st = cb_api.finalize(cb);
    if (st != CL_SUCCESS) why = std::string("clFinalizeCommandBufferKHR failed: ") + cl_error_name(st);
  }
  if (st != CL_SUCCESS) {
    cb_api.release(cb);
    return false;
  }
  cmdbuf = cb;
  cmdbuf_simultaneous = simultaneous;
  cmdbuf_queue = cq;
  clRetainCommandQueue(cq);
  return true;
}

void graph::impl::resolve(queue::impl& q) {
  auto& d = q.dev.get_impl();
  cb_api = load_command_buffer_api(d);
  mode = graph_mode::launch_list;
  // automatic means launch_list: see graph_mode (command buffers measured slower on PoCL 3.1).
  if (options.mode == graph_mode::command_buffer && !nodes.empty()) {
    std::string why;
    if (build_command_buffer(q, why)) {
      mode = graph_mode::command_buffer;
    } else {
      throw error(errc::unsupported, "graph::end_recording",
                  "command_buffer mode was asked for on " + d.name + ", but " + why +
                      "; use launch_list or automatic");
    }
  }
  // Buffers are locked in address order at replay; the addresses hold while the graph holds them.
  lock_order.resize(uses.size());
  for (std::size_t i = 0; i < uses.size(); ++i) lock_order[i] = i;
  std::sort(lock_order.begin(), lock_order.end(),
            [&](std::size_t a, std::size_t b) { return uses[a].raw < uses[b].raw; });
  total_graphs.fetch_add(1, std::memory_order_relaxed);
  total_commands.fetch_add(nodes.size(), std::memory_order_relaxed);
  log::get("runtime")->debug("graph recorded on queue {} ({}): {} command(s), {} buffer(s), {}", q.id, d.name,
                             nodes.size(), uses.size(), graph_mode_name(mode));
}

event graph::impl::replay(queue::impl& q, std::vector<cl_event>* each) {
  std::lock_guard glock(mutex);
  if (recording)
    throw error(errc::invalid_argument, "graph::replay",
                "the graph is still recording; call end_recording() first");
  if (nodes.empty())
    throw error(errc::invalid_argument, "graph::replay", "the graph is empty (nothing was recorded)");
  if (q.ctx.get_impl().id != ctx.get_impl().id)
    throw error(errc::invalid_argument, "graph::replay",
                "the graph was recorded on context " + std::to_string(ctx.get_impl().id) + " (" +
                    ctx.get_device().name() + "); queue " + std::to_string(q.id) + " is of context " +
                    std::to_string(q.ctx.get_impl().id) + " (" + q.dev.name() +
                    "): replay on a queue of the recording context, or record the graph again there");
  if (q.recording.load(std::memory_order_acquire))
    throw error(errc::invalid_argument, "graph::replay",
                "queue " + std::to_string(q.id) +
                    " is recording a graph; a replay cannot be recorded (end that recording first)");
  held.resize(uses.size());
  for (std::size_t i = 0; i < uses.size(); ++i) {
    held[i] = uses[i].buf.lock();
    if (!held[i]) {
      held.clear();
      throw error(
          errc::invalid_argument, "graph::replay",
          "a buffer used by " + uses[i].first_user +
              " was destroyed after recording; keep the graph's buffers alive, or record the graph again");
    }
  }
  held_usm.resize(usms.size());
  for (std::size_t i = 0; i < usms.size(); ++i) {
    held_usm[i] = usms[i].alloc.lock();
    if (!held_usm[i]) {
      held.clear();
      held_usm.clear();
      throw error(errc::invalid_argument, "graph::replay",
                  "a USM allocation used by " + usms[i].first_user +
                      " was freed after recording; keep it alive, or record the graph again");
    }
  }
  struct buffer_locks {
    graph::impl& g;
    std::size_t locked = 0;
    ~buffer_locks() {
      for (std::size_t i = 0; i < locked; ++i) g.uses[g.lock_order[i]].raw->mutex.unlock();
      g.held.clear();  // keeps the capacity
      g.held_usm.clear();
    }
  } locks{*this};

  std::lock_guard qlock(q.mutex);
  for (auto i : lock_order) {
    uses[i].raw->mutex.lock();
    ++locks.locked;
  }
  // The replay orders like one command group using every buffer of the graph.
  deps.clear();
  auto add_dep = [&](const event::impl* e) {
    if (e && e->ev && std::find(deps.begin(), deps.end(), e) == deps.end()) deps.push_back(e);
  };
  for (auto& u : uses) {
    for (auto& w : u.raw->writers)
      if (w.begin < u.end && u.begin < w.end) add_dep(w.ev.get());
    if (writes(u.mode))
      for (auto& r : u.raw->readers)
        if (r.begin < u.end && u.begin < r.end) add_dep(r.ev.get());
  }
  detail::lane& lane = detail::pick_lane(q, deps.data(), deps.size());
  detail::wait_list wl;
  for (auto* e : deps) wl.add(e, lane.id);
  if (lane.pending_foreign) wl.add(lane.pending_foreign.get());

  auto ev = std::make_shared<event::impl>();
  ev->profiling = q.options.enable_profiling;
  ev->owner = q.weak_from_this();
  for (auto* e : deps) ev->deps.add(e->ev);
  cl_event out = nullptr;
  const bool cmdbuf_free = cmdbuf_simultaneous || !pending(cmdbuf_last);
  if (cmdbuf && lane.cq == cmdbuf_queue && !each && cmdbuf_free) {
    detail::check_cl(cb_api.enqueue(0, nullptr, cmdbuf, wl.size(), wl.data(), &out),
                     "clEnqueueCommandBufferKHR", "graph of " + std::to_string(nodes.size()) + " commands");
    if (cmdbuf_last) clReleaseEvent(cmdbuf_last);
    cmdbuf_last = out;
    clRetainEvent(out);
  } else {
    if (cmdbuf) {
      const std::string why = !cmdbuf_free ? "the command buffer's last replay is pending"
                              : lane.cq != cmdbuf_queue
                                  ? "lane " + std::to_string(lane.id) + " is not its lane"
                                  : "a timed replay";
      log::get("runtime")->debug("graph replay on queue {}: {}; launch list used", q.id, why);
    }
    const std::size_t last = nodes.size() - 1;
    for (std::size_t i = 0; i <= last; ++i) {
      auto& n = nodes[i];
      const cl_uint nw = i == 0 ? wl.size() : 0;
      const cl_event* w = i == 0 ? wl.data() : nullptr;
      cl_event* o = each ? &(*each)[i] : i == last ? &out : nullptr;
      cl_int st = CL_SUCCESS;
      const char* op = "clEnqueueNDRangeKernel";
      switch (n.kind) {
        case detail::command_kind::kernel:
          st = clEnqueueNDRangeKernel(lane.cq, n.k, n.dims, nullptr, n.global,
                                      n.has_local ? n.local : nullptr, nw, w, o);
          break;
        case detail::command_kind::copy:
          op = "clEnqueueCopyBuffer";
          st = clEnqueueCopyBuffer(lane.cq, n.src, n.dst, n.src_offset, n.dst_offset, n.bytes, nw, w, o);
          break;
        case detail::command_kind::fill:
          op = "clEnqueueFillBuffer";
          st =
              clEnqueueFillBuffer(lane.cq, n.dst, n.pattern, n.pattern_size, n.dst_offset, n.bytes, nw, w, o);
          break;
        default:
          break;
      }
      if (st != CL_SUCCESS) {
        // Keep the queue's order intact for what was enqueued, then report the failure.
        if (i > 0 && clEnqueueMarkerWithWaitList(lane.cq, 0, nullptr, &out) == CL_SUCCESS) {
          ev->ev = out;
          ev->lane_id = lane.id;
          for (auto& u : uses) detail::set_writer(*u.raw, ev, u.begin, u.end);
          lane.last = ev;
          detail::track_submitted(q, ev);
        }
        detail::throw_cl(st, op, "replaying " + describe(i));
      }
    }
    if (each) {  // the last command's event is also the replay's
      out = each->back();
      clRetainEvent(out);
    }
  }
  ev->ev = out;
  ev->lane_id = lane.id;
  for (auto& u : uses) {
    if (u.begin == u.end) continue;
    if (writes(u.mode))
      detail::set_writer(*u.raw, ev, u.begin, u.end);
    else
      detail::add_reader(*u.raw, ev, u.begin, u.end);
  }
  lane.last = ev;
  lane.pending_foreign.reset();
  detail::track_submitted(q, ev);
  ++replays;
  total_replays.fetch_add(1, std::memory_order_relaxed);
  total_commands_replayed.fetch_add(nodes.size(), std::memory_order_relaxed);
  return event(std::move(ev));
}

void graph::begin_recording(queue& q, graph_options options) {
  auto& qi = q.get_impl();
  if (impl_ && (impl_->recording || !impl_->nodes.empty() || !impl_->uses.empty()))
    throw error(errc::invalid_argument, "graph::begin_recording",
                impl_->recording ? "the graph is already recording"
                                 : "the graph already holds a recording; use a new graph");
  auto g = std::make_shared<impl>();
  g->options = options;
  g->ctx = qi.ctx;
  g->recording_queue = qi.weak_from_this();
  g->first_owned_serial = detail::next_buffer_serial();
  g->recording = true;
  {
    std::lock_guard lock(qi.mutex);
    if (qi.recorder)
      throw error(
          errc::invalid_argument, "graph::begin_recording",
          "queue " + std::to_string(qi.id) + " is already recording a graph; one recording per queue");
    qi.recorder = g;
    qi.recording.store(true, std::memory_order_release);
  }
  recording_here = g;
  impl_ = std::move(g);
}

void graph::end_recording() {
  if (!impl_ || !impl_->recording)
    throw error(errc::invalid_argument, "graph::end_recording", "the graph is not recording");
  auto q = impl_->recording_queue.lock();
  impl_->recording = false;
  if (recording_here.lock() == impl_) recording_here.reset();
  if (!q) throw error(errc::invalid_argument, "graph::end_recording", "the recording queue was destroyed");
  {
    std::lock_guard lock(q->mutex);
    q->recorder.reset();
    q->recording.store(false, std::memory_order_release);
  }
  std::lock_guard glock(impl_->mutex);
  impl_->resolve(*q);
}

graph graph::record(queue& q, const std::function<void()>& body, graph_options options) {
  graph g;
  g.begin_recording(q, options);
  try {
    body();
  } catch (...) {
    auto& qi = q.get_impl();
    {
      std::lock_guard lock(qi.mutex);
      qi.recorder.reset();
      qi.recording.store(false, std::memory_order_release);
    }
    recording_here.reset();
    throw;
  }
  g.end_recording();
  return g;
}

event graph::replay(queue& q) {
  if (!impl_)
    throw error(errc::invalid_argument, "graph::replay", "the graph is empty (nothing was recorded)");
  return impl_->replay(q.get_impl());
}

std::vector<graph::command_time> graph::replay_timed(queue& q) {
  if (!impl_)
    throw error(errc::invalid_argument, "graph::replay_timed", "the graph is empty (nothing was recorded)");
  auto& qi = q.get_impl();
  if (!qi.options.enable_profiling)
    throw error(errc::invalid_argument, "graph::replay_timed",
                "queue " + std::to_string(qi.id) +
                    " has profiling off; time a replay on a queue made with queue_options::enable_profiling");
  std::vector<cl_event> evs(impl_->nodes.size(), nullptr);
  struct release_all {
    std::vector<cl_event>& evs;
    ~release_all() {
      for (auto e : evs)
        if (e) clReleaseEvent(e);
    }
  } guard{evs};
  impl_->replay(qi, &evs);
  detail::check_cl(clWaitForEvents(static_cast<cl_uint>(evs.size()), evs.data()), "clWaitForEvents",
                   "a timed graph replay");
  std::vector<command_time> out(evs.size());
  for (std::size_t i = 0; i < evs.size(); ++i) {
    cl_ulong queued = 0, start = 0, end = 0;
    detail::check_cl(
        clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_QUEUED, sizeof queued, &queued, nullptr),
        "clGetEventProfilingInfo", impl_->describe(i));
    detail::check_cl(
        clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr),
        "clGetEventProfilingInfo", impl_->describe(i));
    detail::check_cl(clGetEventProfilingInfo(evs[i], CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr),
                     "clGetEventProfilingInfo", impl_->describe(i));
    out[i] = {impl_->describe(i),
              impl_->name_of(i),
              end > start ? static_cast<double>(end - start) * 1e-9 : 0.0,
              queued,
              start,
              end};
  }
  return out;
}

bool graph::is_recording() const noexcept {
  return impl_ && impl_->recording;
}
std::size_t graph::command_count() const noexcept {
  return impl_ ? impl_->nodes.size() : 0;
}
std::uint64_t graph::replay_count() const noexcept {
  return impl_ ? impl_->replays : 0;
}
graph_mode graph::mode() const noexcept {
  return impl_ ? impl_->mode : graph_mode::automatic;
}

namespace detail {

void record_group(queue::impl& q, command_group& cg) {
  std::lock_guard lock(q.mutex);
  if (!q.recorder) throw error(errc::internal, "queue::submit", "recording flag without a recorder");
  q.recorder->record(q, cg);
}

void check_not_recording(const char* operation, const char* what) {
  auto g = recording_here.lock();
  if (!g || !g->recording) return;
  auto q = g->recording_queue.lock();
  throw error(errc::invalid_argument, operation,
              std::string(what) + " cannot be recorded in a graph (this thread is recording queue " +
                  (q ? std::to_string(q->id) : std::string("?")) +
                  "); end the recording before it, or do it between replays");
}

void* param_slots::acquire() {
  auto& s = slots_[next_];
  next_ = (next_ + 1) % count;
  if (s.written) s.written.wait();
  s.written = event{};
  return s.bytes;
}

void param_slots::release(event written) {
  slots_[(next_ + count - 1) % count].written = std::move(written);
}

param_slots::~param_slots() {
  for (auto& s : slots_) {
    try {
      if (s.written) s.written.wait();
    } catch (const std::exception& e) {
      log::get("runtime")->error("graph_param: a pending write failed: {}", e.what());
    }
  }
}

}  // namespace detail
}  // namespace prism
