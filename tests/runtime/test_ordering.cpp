// SPDX-License-Identifier: Apache-2.0
// Dependency ordering in an out-of-order queue: a producer held back by a user event on one lane
// and a dependent command the runtime puts on another lane. Fails if RAW/WAR/WAW ordering breaks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "prism/interop/opencl.hpp"
#include "prism/runtime.hpp"
#include "tests/runtime/test_support.hpp"

using namespace prism;
using prism::test::default_queue;
using prism::test::test_program;

namespace {
constexpr int n = 64;

cl_command_queue queue_of(const event& e) {
  cl_command_queue q = nullptr;
  clGetEventInfo(interop::native(e), CL_EVENT_COMMAND_QUEUE, sizeof q, &q, nullptr);
  return q;
}

/// A user event the test opens by hand: a command gated on it cannot finish before open().
struct gate {
  cl_event ev = nullptr;
  explicit gate(const context& ctx) {
    cl_int st = CL_SUCCESS;
    ev = clCreateUserEvent(interop::native(ctx)(), &st);
  }
  void open() {
    if (ev) clSetUserEventStatus(ev, CL_COMPLETE);
  }
  ~gate() {
    open();
    clReleaseEvent(ev);
  }
};

struct ordering : ::testing::Test {
  queue q{default_queue().get_device(), queue_options{.in_order = false, .lanes = 4}};
  program prog = test_program(q.get_context());
  kernel add_const = prog.get_kernel("add_const");
  kernel copy_int = prog.get_kernel("copy_int");
  gate g{q.get_context()};

  /// A native command on `lane_of` buffers that writes `src` (or copies `from`) into the
  /// accessor's buffer only once the gate opens: the slow producer of every test.
  static cl_event gated_write(interop::native_handle& nh, cl_event gate_ev, cl_mem dst, const int* src) {
    std::vector<cl_event> wl(nh.wait_list());
    wl.push_back(gate_ev);
    cl_event ev = nullptr;
    cl_int st = clEnqueueWriteBuffer(nh.queue(), dst, CL_FALSE, 0, n * sizeof(int), src,
                                     static_cast<cl_uint>(wl.size()), wl.data(), &ev);
    if (st != CL_SUCCESS) throw error(errc::opencl_error, "gated_write", "enqueue failed", st);
    return ev;
  }
  static cl_event gated_copy(interop::native_handle& nh, cl_event gate_ev, cl_mem src, cl_mem dst) {
    std::vector<cl_event> wl(nh.wait_list());
    wl.push_back(gate_ev);
    cl_event ev = nullptr;
    cl_int st = clEnqueueCopyBuffer(nh.queue(), src, dst, 0, 0, n * sizeof(int),
                                    static_cast<cl_uint>(wl.size()), wl.data(), &ev);
    if (st != CL_SUCCESS) throw error(errc::opencl_error, "gated_copy", "enqueue failed", st);
    return ev;
  }
  /// The dependent command must still be waiting while the gate is closed.
  static void expect_blocked(const event& e, const char* what) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_NE(e.status(), event_status::complete) << what << " finished before the command it depends on";
  }
};
}  // namespace

TEST_F(ordering, ReadAfterWriteAcrossLanes) {
  buffer<int> a(q, n), lane_pick(q, n), out(q, n);
  q.fill(a, 0).wait();
  std::vector<int> fives(n, 5);
  auto producer = q.submit([&](handler& h) {
    accessor<int> w(a, h, write_only);
    interop::enqueue_native(
        h, [&](interop::native_handle& nh) { return gated_write(nh, g.ev, nh.mem(w), fives.data()); });
  });
  auto other = q.fill(lane_pick, 1);
  auto consumer = q.submit([&](handler& h) {
    accessor<int> r(a, h, read_only);
    accessor<int> o(out, h, discard_write);
    accessor<int> pick(lane_pick, h, read_only);  // declared last: its lane is chosen
    h.parallel_for(range<1>(n), add_const, r, o, 100);
    (void)pick;
  });
  ASSERT_NE(queue_of(producer), queue_of(consumer)) << "test setup: the consumer must run on another lane";
  EXPECT_EQ(queue_of(other), queue_of(consumer));
  expect_blocked(consumer, "the reader");
  g.open();
  EXPECT_EQ(out.read(), std::vector<int>(n, 105)) << "the consumer ran before its producer finished";
  q.wait_and_throw();
}

TEST_F(ordering, WriteAfterReadAcrossLanes) {
  buffer<int> a(q, n), lane_pick(q, n), copy(q, n);
  q.fill(a, 1).wait();
  auto reader = q.submit([&](handler& h) {
    accessor<int> r(a, h, read_only);
    accessor<int> c(copy, h, discard_write);
    interop::enqueue_native(
        h, [&](interop::native_handle& nh) { return gated_copy(nh, g.ev, nh.mem(r), nh.mem(c)); });
  });
  q.fill(lane_pick, 0);
  auto writer = q.submit([&](handler& h) {
    accessor<int> p(lane_pick, h, read_only);
    accessor<int> w(a, h, discard_write);
    accessor<int> pick(lane_pick, h, read_only);
    h.parallel_for(range<1>(n), add_const, p, w, 9);
    (void)pick;
  });
  ASSERT_NE(queue_of(reader), queue_of(writer)) << "test setup: the writer must run on another lane";
  expect_blocked(writer, "the writer");
  g.open();
  EXPECT_EQ(copy.read(), std::vector<int>(n, 1))
      << "the writer overwrote the input before the reader read it";
  EXPECT_EQ(a.read(), std::vector<int>(n, 9));
  q.wait_and_throw();
}

TEST_F(ordering, WriteAfterWriteAcrossLanes) {
  buffer<int> a(q, n), lane_pick(q, n);
  std::vector<int> ones(n, 1);
  auto first = q.submit([&](handler& h) {
    accessor<int> w(a, h, discard_write);
    interop::enqueue_native(
        h, [&](interop::native_handle& nh) { return gated_write(nh, g.ev, nh.mem(w), ones.data()); });
  });
  q.fill(lane_pick, 2);
  auto second = q.submit([&](handler& h) {
    accessor<int> w(a, h, discard_write);
    accessor<int> p(lane_pick, h, read_only);
    h.parallel_for(range<1>(n), copy_int, p, w);
  });
  ASSERT_NE(queue_of(first), queue_of(second)) << "test setup: the second writer must run on another lane";
  expect_blocked(second, "the second writer");
  g.open();
  EXPECT_EQ(a.read(), std::vector<int>(n, 2)) << "the first writer finished after the second";
  q.wait_and_throw();
}

TEST_F(ordering, IndependentGroupsSpreadOverLanes) {
  EXPECT_EQ(q.lane_count(), 4u);
  EXPECT_FALSE(q.is_in_order());
  buffer<int> a(q, n), b(q, n);
  auto e1 = q.fill(a, 1);
  auto e2 = q.fill(b, 2);
  EXPECT_NE(queue_of(e1), queue_of(e2));
  q.wait();
  // An explicit dependency orders a command with no shared buffer.
  std::vector<int> sevens(n, 7);
  auto slow = q.submit([&](handler& h) {
    accessor<int> w(a, h, write_only);
    interop::enqueue_native(
        h, [&](interop::native_handle& nh) { return gated_write(nh, g.ev, nh.mem(w), sevens.data()); });
  });
  std::atomic<int> seen{-1};
  auto after = q.submit([&](handler& h) {
    h.depends_on(slow);
    h.host_task([&] { seen = slow.status() == event_status::complete ? 1 : 0; });
  });
  expect_blocked(after, "the host task");
  g.open();
  after.wait();
  EXPECT_EQ(seen.load(), 1);
  ASSERT_EQ(after.dependencies().size(), 1u);
  EXPECT_EQ(interop::native(after.dependencies()[0]), interop::native(slow));
  EXPECT_EQ(a.read(), sevens);
}

TEST_F(ordering, AcrossQueuesOfOneContext) {
  // Two in-order queues: the second's reader must wait for the first's gated writer.
  queue other(q.get_context());
  buffer<int> a(q, n), out(q, n);
  std::vector<int> threes(n, 3);
  auto producer = q.submit([&](handler& h) {
    accessor<int> w(a, h, discard_write);
    interop::enqueue_native(
        h, [&](interop::native_handle& nh) { return gated_write(nh, g.ev, nh.mem(w), threes.data()); });
  });
  auto consumer = other.submit([&](handler& h) {
    accessor<int> r(a, h, read_only);
    accessor<int> o(out, h, discard_write);
    h.parallel_for(range<1>(n), add_const, r, o, 1);
  });
  ASSERT_NE(queue_of(producer), queue_of(consumer));
  expect_blocked(consumer, "the other queue's reader");
  g.open();
  EXPECT_EQ(out.read(), std::vector<int>(n, 4));
}

TEST_F(ordering, HostWritesWaitForDeviceReaders) {
  // buffer::write (a host write) must not overwrite data a gated device reader still needs.
  buffer<int> a(q, n), copy(q, n);
  q.fill(a, 1).wait();
  q.submit([&](handler& h) {
    accessor<int> r(a, h, read_only);
    accessor<int> c(copy, h, discard_write);
    interop::enqueue_native(
        h, [&](interop::native_handle& nh) { return gated_copy(nh, g.ev, nh.mem(r), nh.mem(c)); });
  });
  std::atomic<bool> written{false};
  std::thread writer([&] {
    std::vector<int> zeros(n, 0);
    a.write(zeros);
    written = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(written.load()) << "the host write did not wait for the device reader";
  g.open();
  writer.join();
  EXPECT_EQ(copy.read(), std::vector<int>(n, 1));
  EXPECT_EQ(a.read(), std::vector<int>(n, 0));
}

// Range-aware dependencies (issue 11 item 8): accessors limited to byte ranges of one buffer
// order only against commands whose ranges overlap theirs.
namespace {
bool completes_within(const event& e, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (e.status() != event_status::complete) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}
}  // namespace

TEST_F(ordering, DisjointHalvesOfOneBufferRunConcurrently) {
  buffer<int> a(q, 2 * n);
  a.write(std::vector<int>(2 * n, 0));  // a blocking host write: no device user left to pick a lane
  std::vector<int> ones(n, 1);
  auto first = q.submit([&](handler& h) {
    accessor<int> w(a, h, n, 0, discard_write);  // elements [0, n)
    interop::enqueue_native(
        h, [&](interop::native_handle& nh) { return gated_write(nh, g.ev, nh.mem(w), ones.data()); });
  });
  auto second = q.submit([&](handler& h) {
    accessor<int> w(a, h, n, n, discard_write);  // elements [n, 2n)
    h.fill(w, 2, n, n);
  });
  ASSERT_NE(queue_of(first), queue_of(second)) << "test setup: the writers must run on different lanes";
  EXPECT_TRUE(second.dependencies().empty()) << "a write to the other half depends on the gated write";
  EXPECT_TRUE(completes_within(second, std::chrono::seconds(10)))
      << "the write to the second half waited for the gated write to the first half";
  EXPECT_NE(first.status(), event_status::complete) << "test setup: the gate did not hold the first write";
  g.open();
  std::vector<int> expect(n, 1);
  expect.resize(2 * n, 2);
  EXPECT_EQ(a.read(), expect);
  q.wait_and_throw();
}

TEST_F(ordering, OverlappingRangesStillOrder) {
  buffer<int> a(q, 2 * n), out(q, 2 * n);
  q.fill(a, 0).wait();
  std::vector<int> ones(n, 1);
  auto first = q.submit([&](handler& h) {
    accessor<int> w(a, h, n, 0, discard_write);  // elements [0, n)
    interop::enqueue_native(
        h, [&](interop::native_handle& nh) { return gated_write(nh, g.ev, nh.mem(w), ones.data()); });
  });
  // WAW: [n/2, n/2 + n) overlaps the gated write by n/2 elements.
  auto overlap = q.submit([&](handler& h) {
    accessor<int> w(a, h, n, n / 2, write_only);
    h.fill(w, 2, n, n / 2);
  });
  // RAW: a copy reading one element inside the first write's range (byte_range form).
  auto reader = q.submit([&](handler& h) {
    accessor<int> r(a, h, read_only, byte_range{(n - 1) * sizeof(int), sizeof(int)});
    accessor<int> o(out, h, discard_write);
    h.copy(r, o, sizeof(int), (n - 1) * sizeof(int), 0);
  });
  // The old whole-buffer accessor still orders against a range writer.
  auto whole = q.submit([&](handler& h) {
    accessor<int> r(a, h, read_only);
    accessor<int> o(out, h, write_only);
    h.copy(r, o, 2 * n * sizeof(int));
  });
  expect_blocked(overlap, "the overlapping writer");
  EXPECT_NE(reader.status(), event_status::complete) << "the overlapping reader ran before its writer";
  EXPECT_NE(whole.status(), event_status::complete) << "the whole-buffer reader ran before a range writer";
  g.open();
  std::vector<int> expect(n / 2, 1);
  expect.resize(n / 2 + n, 2);
  expect.resize(2 * n, 0);
  EXPECT_EQ(a.read(), expect) << "the overlapping writer did not run after the gated one";
  EXPECT_EQ(out.read(), expect);
  q.wait_and_throw();
}

TEST_F(ordering, WriteAfterReadPerRange) {
  buffer<int> a(q, 2 * n), copy(q, n);
  a.write(std::vector<int>(2 * n, 1));
  // A gated reader of [0, n): a writer of [n, 2n) does not wait for it, a writer of [0, n) does.
  q.submit([&](handler& h) {
    accessor<int> r(a, h, n, 0, read_only);
    accessor<int> c(copy, h, discard_write);
    interop::enqueue_native(
        h, [&](interop::native_handle& nh) { return gated_copy(nh, g.ev, nh.mem(r), nh.mem(c)); });
  });
  auto disjoint = q.submit([&](handler& h) {
    accessor<int> w(a, h, n, n, discard_write);
    h.fill(w, 5, n, n);
  });
  auto overlapping = q.submit([&](handler& h) {
    accessor<int> w(a, h, 1, 0, discard_write);
    h.fill(w, 9, 1, 0);
  });
  EXPECT_TRUE(completes_within(disjoint, std::chrono::seconds(10)))
      << "a write to bytes the gated reader does not read waited for it";
  expect_blocked(overlapping, "the writer of bytes a gated reader reads");
  g.open();
  EXPECT_EQ(copy.read(), std::vector<int>(n, 1))
      << "the writer overwrote the input before the reader read it";
  std::vector<int> expect(n, 1);
  expect[0] = 9;
  expect.resize(2 * n, 5);
  EXPECT_EQ(a.read(), expect);
  q.wait_and_throw();
}

TEST(Accessors, RangesOutsideTheBufferAreRefused) {
  auto& q = default_queue();
  buffer<int> a(q, 8);
  try {
    q.submit([&](handler& h) { accessor<int> w(a, h, 4, 6, write_only); });
    FAIL() << "an accessor range past the end was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("outside the buffer of 32 bytes"), std::string::npos) << e.what();
  }
}
