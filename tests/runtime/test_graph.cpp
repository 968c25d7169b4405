// SPDX-License-Identifier: Apache-2.0
// prism::graph: a recorded chain of dependent kernels replays bit for bit like eager execution
// (launch list and command buffer), graph_param values reach the kernels, and every use a graph
// cannot honour is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "prism/interop/opencl.hpp"
#include "prism/runtime.hpp"
#include "tests/runtime/test_support.hpp"

using namespace prism;
using prism::test::default_queue;
using prism::test::message_of;
using prism::test::test_program;

namespace {
constexpr int n = 64;

bool has_command_buffer(const device& d) {
  auto ext = d.extensions();
  return std::find(ext.begin(), ext.end(), "cl_khr_command_buffer") != ext.end();
}

/// iota -> add_const -> add_param -> copy: each kernel reads what the previous one wrote.
struct chain {
  buffer<int> a, b, c, d;
  explicit chain(queue& q) : a(q, n), b(q, n), c(q, n), d(q, n) {}
  void submit(queue& q, const program& prog, graph_param<int>& p) {
    kernel iota = prog.get_kernel("iota"), add_const = prog.get_kernel("add_const"),
           add_param = prog.get_kernel("add_param"), copy_int = prog.get_kernel("copy_int");
    q.submit([&](handler& h) {
      accessor<int> o(a, h, discard_write);
      h.parallel_for(range<1>(n), iota, o, 10);
    });
    q.submit([&](handler& h) {
      accessor<int> i(a, h, read_only);
      accessor<int> o(b, h, discard_write);
      h.parallel_for(range<1>(n), add_const, i, o, 3);
    });
    q.submit([&](handler& h) {
      accessor<int> i(b, h, read_only);
      accessor<int> o(c, h, discard_write);
      accessor<int> v(p.get_buffer(), h, read_only);
      h.parallel_for(range<1>(n), add_param, i, o, v);
    });
    q.submit([&](handler& h) {
      accessor<int> i(c, h, read_only);
      accessor<int> o(d, h, discard_write);
      h.parallel_for(range<1>(n), copy_int, i, o);
    });
  }
};

/// Each test runs in both modes; command_buffer is skipped where the device lacks the extension.
class graph_modes : public ::testing::TestWithParam<graph_mode> {
 protected:
  void SetUp() override {
    if (GetParam() == graph_mode::command_buffer && !has_command_buffer(default_queue().get_device()))
      GTEST_SKIP() << default_queue().get_device().name() << " has no cl_khr_command_buffer";
  }
};
}  // namespace

TEST_P(graph_modes, ReplayMatchesEagerExecutionBitForBit) {
  auto& q = default_queue();
  auto prog = test_program(q.get_context());
  graph_param<int> eager_p(q, 5), graph_p(q, 5);
  chain eager(q), replayed(q);
  eager.submit(q, prog, eager_p);
  const auto eager_5 = eager.d.read();

  q.fill(replayed.d, -1);
  const auto before = graph_counters();
  graph g = graph::record(q, [&] { replayed.submit(q, prog, graph_p); }, {.mode = GetParam()});
  EXPECT_EQ(g.mode(), GetParam());
  EXPECT_EQ(g.command_count(), 4u);
  EXPECT_EQ(replayed.d.read(), std::vector<int>(n, -1)) << "recording must not run the commands";
  g.replay(q);
  EXPECT_EQ(replayed.d.read(), eager_5);
  EXPECT_EQ(replayed.b.read(), eager.b.read());

  // A parameter set between replays reaches the replayed kernel.
  eager_p.set(q, -7);
  eager.submit(q, prog, eager_p);
  graph_p.set(q, -7);
  g.replay(q);
  const auto eager_m7 = eager.d.read();
  EXPECT_NE(eager_m7, eager_5);
  EXPECT_EQ(replayed.d.read(), eager_m7);
  EXPECT_EQ(g.replay_count(), 2u);
  const auto after = graph_counters();
  EXPECT_EQ(after.graphs_recorded - before.graphs_recorded, 1u);
  EXPECT_EQ(after.replays - before.replays, 2u);
  EXPECT_EQ(after.commands_replayed - before.commands_replayed, 8u);
  q.wait_and_throw();
}

// Replays queued back to back, each followed by a parameter write and a non-blocking read, with
// no wait in between (a host running ahead of the device): every read sees its own replay.
TEST_P(graph_modes, ReplaysQueuedBackToBackWithoutWaiting) {
  auto& q = default_queue();
  auto prog = test_program(q.get_context());
  graph_param<int> p(q, 0);
  chain c(q);
  graph g = graph::record(q, [&] { c.submit(q, prog, p); }, {.mode = GetParam()});
  constexpr int rounds = 12;
  std::vector<std::vector<int>> got(rounds, std::vector<int>(n, -1));
  std::vector<event> reads;
  for (int r = 0; r < rounds; ++r) {
    p.set(q, 100 * r);
    g.replay(q);
    reads.push_back(q.submit([&](handler& h) {
      accessor<int> d(c.d, h, read_only);
      h.copy_to_host(d, got[r].data(), n * sizeof(int));
    }));
  }
  for (int r = 0; r < rounds; ++r) {
    reads[r].wait();
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(got[r][i], 10 + i + 3 + 100 * r) << "round " << r << " element " << i;
  }
  EXPECT_EQ(g.replay_count(), static_cast<std::uint64_t>(rounds));
  q.wait_and_throw();
}

TEST_P(graph_modes, TimedReplayRunsTheGraphAndTimesEveryCommand) {
  auto& q = default_queue();
  auto prog = test_program(q.get_context());
  graph_param<int> eager_p(q, 9), graph_p(q, 9);
  chain eager(q), replayed(q);
  eager.submit(q, prog, eager_p);
  graph g = graph::record(q, [&] { replayed.submit(q, prog, graph_p); }, {.mode = GetParam()});
  // On a profiling queue of the same context: the commands run (as replay() runs them) and each
  // one's device time comes back, named.
  queue_options profiling;
  profiling.enable_profiling = true;
  queue timed(q.get_context(), profiling);
  const auto times = g.replay_timed(timed);
  ASSERT_EQ(times.size(), 4u);
  EXPECT_EQ(replayed.d.read(), eager.d.read());
  EXPECT_NE(times[0].what.find("kernel 'iota' (command 0"), std::string::npos) << times[0].what;
  EXPECT_NE(times[3].what.find("kernel 'copy_int' (command 3"), std::string::npos) << times[3].what;
  EXPECT_EQ(times[0].name, "iota");
  EXPECT_EQ(times[3].name, "copy_int");
  for (const auto& t : times) {
    EXPECT_GE(t.seconds, 0.0) << t.what;
    EXPECT_LT(t.seconds, 10.0) << t.what;
  }
  EXPECT_EQ(g.replay_count(), 1u);
  // A queue without profiling cannot time it.
  const std::string why = message_of([&] { g.replay_timed(q); });
  EXPECT_NE(why.find("profiling off"), std::string::npos) << why;
  EXPECT_NE(why.find("enable_profiling"), std::string::npos) << why;
}

TEST_P(graph_modes, ReplaysOrderAgainstEagerWork) {
  auto& q = default_queue();
  auto prog = test_program(q.get_context());
  auto add_const = prog.get_kernel("add_const");
  queue ooo(q.get_device(), queue_options{.in_order = false, .lanes = 3});
  buffer<int> x(ooo, n), y(ooo, n);
  graph g = graph::record(ooo,
                          [&] {
                            ooo.submit([&](handler& h) {
                              accessor<int> i(x, h, read_only);
                              accessor<int> o(y, h, discard_write);
                              h.parallel_for(range<1>(n), add_const, i, o, 1);
                            });
                          },
                          {.mode = GetParam()});
  // Eager fill -> replay (x+1 into y) -> eager add on y, 10 rounds on an out-of-order queue.
  for (int round = 0; round < 10; ++round) {
    ooo.fill(x, round);
    g.replay(ooo);
    ooo.submit([&](handler& h) {
      accessor<int> i(y, h, read_only);
      accessor<int> o(x, h, discard_write);
      h.parallel_for(range<1>(n), add_const, i, o, 100);
    });
    EXPECT_EQ(x.read(), std::vector<int>(n, round + 101)) << "round " << round;
  }
  ooo.wait_and_throw();
}

INSTANTIATE_TEST_SUITE_P(graph, graph_modes,
                         ::testing::Values(graph_mode::launch_list, graph_mode::command_buffer),
                         [](const auto& info) { return std::string(graph_mode_name(info.param)); });

TEST(graph, CommandsThatCannotBeRecordedAreNamed) {
  queue q(default_queue().get_device());
  buffer<int> a(q, n);
  graph_param<int> p(q, 1);
  graph g;
  g.begin_recording(q);
  EXPECT_NE(message_of([&] { q.submit([&](handler& h) { h.host_task([] {}); }); }).find("host_task"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              q.submit([&](handler& h) {
                interop::enqueue_native(h, [](interop::native_handle&) -> cl_event { return nullptr; });
              });
            }).find("enqueue_native"),
            std::string::npos);
  EXPECT_NE(message_of([&] { (void)a.read(); }).find("blocking read"), std::string::npos);
  EXPECT_NE(message_of([&] { host_accessor<int> h(a); }).find("host accessor"), std::string::npos);
  EXPECT_NE(message_of([&] { q.wait(); }).find("queue::wait"), std::string::npos);
  EXPECT_NE(message_of([&] { p.set(q, 2); }).find("copy_from_host"), std::string::npos);
  std::vector<int> host_copy(n);
  EXPECT_NE(message_of([&] {
              q.submit([&](handler& h) {
                accessor<int> s(a, h, read_only);
                h.copy_to_host(s, host_copy.data(), n * sizeof(int));
              });
            }).find("copy_to_host"),
            std::string::npos);
  auto ptr = malloc_device<int>(n, q);
  EXPECT_NE(message_of([&] { q.fill(ptr, 0, n); }).find("USM"), std::string::npos);
  EXPECT_NE(message_of([&] {
              graph other;
              other.begin_recording(q);
            }).find("already recording"),
            std::string::npos);
  g.end_recording();
  EXPECT_EQ(g.command_count(), 0u);
  EXPECT_NE(message_of([&] { g.replay(q); }).find("empty"), std::string::npos);
  // The queue works normally again.
  q.fill(a, 4);
  EXPECT_EQ(a.read(), std::vector<int>(n, 4));
}

TEST(graph, BadReplaysAreRefused) {
  queue q(default_queue().get_device());
  auto prog = test_program(q.get_context());
  auto add_const = prog.get_kernel("add_const");
  buffer<int> x(q, n);
  graph dangling;
  {
    buffer<int> freed(q, n);
    dangling = graph::record(q, [&] {
      q.submit([&](handler& h) {
        accessor<int> i(x, h, read_only);
        accessor<int> o(freed, h, discard_write);
        h.parallel_for(range<1>(n), add_const, i, o, 1);
      });
    });
  }
  EXPECT_NE(message_of([&] { dangling.replay(q); }).find("destroyed after recording"), std::string::npos);

  buffer<int> y(q, n);
  graph g = graph::record(q, [&] {
    q.submit([&](handler& h) {
      accessor<int> i(x, h, read_only);
      accessor<int> o(y, h, discard_write);
      h.parallel_for(range<1>(n), add_const, i, o, 1);
    });
  });
  // Another context of the same device.
  queue foreign{context(q.get_device())};
  EXPECT_NE(message_of([&] { g.replay(foreign); }).find("context"), std::string::npos);
  // Replaying into a queue that records.
  graph outer;
  outer.begin_recording(q);
  EXPECT_NE(message_of([&] { g.replay(q); }).find("is recording"), std::string::npos);
  outer.end_recording();
  // A body that throws ends the recording and leaves the queue usable.
  EXPECT_THROW(graph::record(q, [&] { throw error(errc::internal, "test", "body failed"); }), error);
  q.fill(x, 1);
  g.replay(q);
  EXPECT_EQ(y.read(), std::vector<int>(n, 2));
}
