// SPDX-License-Identifier: Apache-2.0
// prism::graph: a sequence of command groups recorded on a queue once and replayed many times
// (in the spirit of SYCL command graphs and CUDA graphs), and graph_param, a device scalar the
// host updates between replays. See docs/runtime.md, "Graphs".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>

#include "prism/runtime/buffer.hpp"
#include "prism/runtime/event.hpp"
#include "prism/runtime/handler.hpp"
#include "prism/runtime/queue.hpp"

namespace prism {

/// How a replay reaches the device.
enum class graph_mode : std::uint8_t {
  /// launch_list: on PoCL 3.1 a command-buffer replay measured slower than the launch list
  /// (benchmarks/RESULTS.md, "Graph replay"), and NVIDIA's driver has no command buffers.
  automatic,
  launch_list,     ///< pre-resolved kernels and arguments: only clEnqueue* calls on replay
  command_buffer,  ///< one clEnqueueCommandBufferKHR per replay (cl_khr_command_buffer)
};
const char* graph_mode_name(graph_mode m) noexcept;

struct graph_options {
  graph_mode mode = graph_mode::automatic;
};

/// Process-wide counters, for logs and exit summaries.
struct graph_totals {
  std::uint64_t graphs_recorded = 0;
  std::uint64_t commands_recorded = 0;
  std::uint64_t replays = 0;
  std::uint64_t commands_replayed = 0;
};
graph_totals graph_counters() noexcept;

/// A recorded sequence of kernel launches, copies and fills on buffers and USM allocations.
///
/// Between begin_recording(q) and end_recording(), every command group submitted to `q` (from
/// any thread) is recorded instead of run; submit() then returns a complete (default) event.
/// Commands replay in recording order; a replay as a whole is ordered against other work on the
/// graph's buffers like one command group that uses all of them. Kernel arguments are taken by
/// value at recording time: values that change per replay go through graph_param.
/// Buffers created while the graph records (op outputs, temporaries, workspaces) belong to the
/// graph, which keeps them alive, as a CUDA graph owns the allocations made during its capture;
/// buffers created before recording must outlive the graph's replays (a replay after one was
/// destroyed is an error naming the command that used it).
/// What invalidates a graph: destroying a buffer it uses (an error at replay), and anything that
/// changes what an op call would launch: routes, the tuning database, env overrides (the graph
/// still replays what it recorded; record again to pick the change up, see
/// dispatch::routing_generation()).
/// Host tasks, native commands, host-to-device copies, USM transfers, blocking reads or writes,
/// host accessors and queue waits cannot be recorded: each is an error naming what it was.
/// Thread safety: safe; replays of one graph are serialised.
class graph {
 public:
  graph() = default;

  /// Starts recording on `q`. Errors: the graph is not empty or `q` is already recording.
  void begin_recording(queue& q, graph_options options = {});
  /// Stops recording and resolves the commands (kernels cloned, arguments set, and the command
  /// buffer built in command_buffer mode). Errors: not recording.
  void end_recording();
  /// begin_recording, `body()`, end_recording (also when body throws; the graph is then empty).
  static graph record(queue& q, const std::function<void()>& body, graph_options options = {});

  /// Runs the recorded commands on `q` (a queue of the recording queue's context) and returns
  /// the event of the last one. Errors: `q` of another context, `q` recording, the graph still
  /// recording or empty, a buffer or allocation it uses destroyed since recording.
  event replay(queue& q);
  /// One command's device time in a timed replay: what it was (as errors name it: "kernel
  /// 'name' (command i of the graph)"), its name alone (the kernel's, or the command's kind:
  /// "handler::copy", ...) and profiling END - START in seconds.
  struct command_time {
    std::string what;
    std::string name;
    double seconds = 0;
    /// The command's profiling timestamps in the device's clock (ns): queued by the host, started,
    /// ended. A replay's device span is the last end minus the first start; a command queued
    /// after the first one started means the host's enqueues, not the device, paced the replay.
    std::uint64_t queued_ns = 0, start_ns = 0, end_ns = 0;
  };
  /// Replays once on `q`, which must have profiling on (queue_options::enable_profiling), with an
  /// event for every command (a launch list even where replays use a command buffer), waits, and
  /// returns each command's device time in order: what the kernels themselves take, against
  /// which a replay's wall time shows the launches' cost. Slower than replay(). Errors: those of
  /// replay(); `q` without profiling.
  std::vector<command_time> replay_timed(queue& q);

  bool is_recording() const noexcept;
  /// Commands recorded (kernels, copies, fills).
  std::size_t command_count() const noexcept;
  std::uint64_t replay_count() const noexcept;
  /// The mode replays use (after end_recording).
  graph_mode mode() const noexcept;

  explicit operator bool() const noexcept { return impl_ != nullptr; }
  struct impl;

 private:
  std::shared_ptr<impl> impl_;
};

namespace detail {
/// Host staging slots of a graph_param: a write in flight keeps its slot until it completes.
class param_slots {
 public:
  static constexpr std::size_t count = 8;
  /// The next slot, once the write that last used it has completed.
  void* acquire();
  void release(event written);
  ~param_slots();

 private:
  struct slot {
    alignas(16) unsigned char bytes[64];
    event written;
  };
  std::array<slot, count> slots_{};
  std::size_t next_ = 0;
};
}  // namespace detail

/// A device scalar (one T in a small buffer) that kernels read through an accessor, and that
/// the host sets between graph replays: a position, a KV length. set() is an ordinary command
/// (ordered after earlier readers, before later ones) and does not block.
/// Thread safety: set() from one thread at a time.
template <class T>
class graph_param {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 64, "graph_param<T> needs a small trivial T");

 public:
  graph_param(queue& q, const T& initial) : buf_(q, 1), slots_(std::make_shared<detail::param_slots>()) {
    set(q, initial);
  }
  /// Enqueues the write of `value` on `q`. Errors: `q` is recording a graph.
  event set(queue& q, const T& value) {
    void* slot = slots_->acquire();
    std::memcpy(slot, &value, sizeof(T));
    event e = q.submit([&](handler& h) {
      accessor<T> d(buf_, h, discard_write);
      h.copy_from_host(slot, d, sizeof(T));
    });
    slots_->release(e);
    return e;
  }
  buffer<T>& get_buffer() noexcept { return buf_; }

 private:
  buffer<T> buf_;
  std::shared_ptr<detail::param_slots> slots_;
};

}  // namespace prism
