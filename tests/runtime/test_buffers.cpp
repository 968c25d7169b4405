// SPDX-License-Identifier: Apache-2.0
// Buffers: round trips at sizes 0, 1, odd and 256 MiB, write-back, host accessors, copy/fill
// commands, range checks and allocations larger than the device allows.
#include <gtest/gtest.h>

#include <numeric>

#include "prism/runtime.hpp"
#include "runtime/impl.hpp"
#include "tests/runtime/test_support.hpp"

using namespace prism;
using prism::test::default_queue;
using prism::test::message_of;
using prism::test::test_program;

class BufferRoundTrip : public ::testing::TestWithParam<std::size_t> {};

TEST_P(BufferRoundTrip, HostDeviceHost) {
  auto& q = default_queue();
  const std::size_t n = GetParam();
  std::vector<int> host(n);
  std::iota(host.begin(), host.end(), 7);
  buffer<int> in(q, static_cast<const int*>(host.data()), n);
  EXPECT_EQ(in.size(), n);
  EXPECT_EQ(in.read(), host);
  // Through a kernel too, so the device really holds the data: out = in + 3.
  buffer<int> out(q, n);
  if (n) {
    auto k = test_program(q.get_context()).get_kernel("add_const");
    q.submit([&](handler& h) {
      accessor<int> a(in, h, read_only);
      accessor<int> b(out, h, discard_write);
      h.parallel_for(range<1>(n), k, a, b, 3);
    });
  }
  auto got = out.read();
  ASSERT_EQ(got.size(), n);
  for (std::size_t i = 0; i < n; ++i)
    if (got[i] != host[i] + 3) FAIL() << "element " << i << ": " << got[i] << " != " << host[i] + 3;
  // Partial write and read at an offset.
  if (n >= 3) {
    std::vector<int> two = {-1, -2};
    out.write(two, n - 2);
    std::vector<int> tail(2);
    out.read(tail, n - 2);
    EXPECT_EQ(tail, two);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, BufferRoundTrip,
                         ::testing::Values(std::size_t{0}, std::size_t{1}, std::size_t{1237},
                                           std::size_t{256} << 20 >> 2),  // 256 MiB of int
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST(Buffers, WriteBackAtDestruction) {
  auto& q = default_queue();
  std::vector<int> host(100, 0);
  {
    buffer<int> b(q, host.data(), host.size());
    auto k = test_program(q.get_context()).get_kernel("iota");
    q.submit([&](handler& h) {
      accessor<int> a(b, h, write_only);
      h.parallel_for(range<1>(100), k, a, 1000);
    });
    EXPECT_EQ(host[5], 0) << "write-back must wait for the buffer's destruction";
  }
  for (int i = 0; i < 100; ++i) ASSERT_EQ(host[i], 1000 + i);
  // set_final_data(nullptr) turns write-back off.
  std::vector<int> untouched(10, 5);
  {
    buffer<int> b(q, untouched.data(), untouched.size());
    b.set_final_data(nullptr);
    q.fill(b, 9);
  }
  EXPECT_EQ(untouched, std::vector<int>(10, 5));
}

TEST(Buffers, HostAccessorSeesDeviceWritesAndPublishesHostWrites) {
  auto& q = default_queue();
  buffer<int> b(q, 64);
  auto k = test_program(q.get_context()).get_kernel("iota");
  q.submit([&](handler& h) {
    accessor<int> a(b, h, discard_write);
    h.parallel_for(range<1>(64), k, a, 0);
  });
  {
    host_accessor<int> ha(b, read_write);
    ASSERT_EQ(ha.size(), 64u);
    EXPECT_EQ(ha[63], 63);
    for (auto& v : ha) v *= 2;
  }
  buffer<int> c(q, 64);
  auto add = test_program(q.get_context()).get_kernel("add_const");
  q.submit([&](handler& h) {
    accessor<int> a(b, h, read_only);
    accessor<int> o(c, h, discard_write);
    h.parallel_for(range<1>(64), add, a, o, 1);
  });
  host_accessor<int> hc(c, read_only);
  EXPECT_EQ(hc[10], 21);
}

TEST(Buffers, CopyAndFillCommands) {
  auto& q = default_queue();
  buffer<int> a(q, 1000), b(q, 1000);
  q.fill(a, 42);
  q.copy(a, b);
  auto got = b.read();
  EXPECT_EQ(got, std::vector<int>(1000, 42));
  q.submit([&](handler& h) {
    accessor<int> d(b, h, write_only);
    h.fill(d, 7, 10, 990);
  });
  got = b.read();
  EXPECT_EQ(got[989], 42);
  EXPECT_EQ(got[990], 7);
  EXPECT_EQ(got[999], 7);
}

// A copy reaching past its buffer and a kernel argument naming no allocation are refused by name
// before anything is enqueued, eagerly and while a graph records (one check serves both).
TEST(Buffers, CommandsPastTheirBuffersAndNullPointersAreRefused) {
  auto& q = default_queue();
  const std::size_t n = 16;
  buffer<int> a(q, n), b(q, n);
  auto copy_past = [&] {
    q.submit([&](handler& h) {
      accessor<int> s(a, h, read_only);
      accessor<int> d(b, h, write_only);
      h.copy(s, d, 8 * sizeof(int), 12 * sizeof(int));
    });
  };
  auto k = test_program(q.get_context()).get_kernel("add_const");
  auto null_arg = [&] {
    q.submit([&](handler& h) {
      accessor<int> o(b, h, discard_write);
      h.parallel_for(range<1>(n), k, device_ptr<int>(), o, 3);
    });
  };
  const std::string past = "range [48, 80) is outside a buffer of 64 bytes";
  const std::string null_ptr = "argument 0 of kernel 'add_const' is a null device_ptr";
  std::string why = message_of(copy_past);
  EXPECT_NE(why.find("handler::copy (source)"), std::string::npos) << why;
  EXPECT_NE(why.find(past), std::string::npos) << why;
  why = message_of(null_arg);
  EXPECT_NE(why.find(null_ptr), std::string::npos) << why;
  graph g;
  g.begin_recording(q);
  const std::string recorded_copy = message_of(copy_past), recorded_arg = message_of(null_arg);
  g.end_recording();
  EXPECT_NE(recorded_copy.find("handler::copy"), std::string::npos) << recorded_copy;
  EXPECT_NE(recorded_copy.find(past), std::string::npos) << recorded_copy;
  EXPECT_NE(recorded_arg.find(null_ptr), std::string::npos) << recorded_arg;
  EXPECT_EQ(g.command_count(), 0u);
  q.wait();
}

// OpenCL fills take patterns of 1 to 128 bytes in powers of 2: any other element size is refused
// before anything is enqueued, naming it, for a buffer, a USM allocation and a graph recording.
TEST(Buffers, FillRefusesPatternSizesOpenCLLacks) {
  struct rgb {
    unsigned char c[3];
  };
  auto& q = default_queue();
  const std::string sizes = "element size 3 is not 1, 2, 4, 8, 16, 32, 64 or 128 bytes";
  buffer<rgb> a(q, 8);
  auto fill_a = [&] {
    q.submit([&](handler& h) {
      accessor<rgb> d(a, h, write_only);
      h.fill(d, rgb{{1, 2, 3}}, 8);
    });
  };
  std::string why = message_of(fill_a);
  EXPECT_NE(why.find("handler::fill"), std::string::npos) << why;
  EXPECT_NE(why.find(sizes), std::string::npos) << why;
  auto p = malloc_device<rgb>(8, q);
  why = message_of([&] { q.fill(p, rgb{{1, 2, 3}}, 8); });
  EXPECT_NE(why.find("queue::fill"), std::string::npos) << why;
  EXPECT_NE(why.find(sizes), std::string::npos) << why;
  free(p);
  graph g;
  g.begin_recording(q);
  why = message_of(fill_a);
  g.end_recording();
  EXPECT_NE(why.find(sizes), std::string::npos) << why;
  EXPECT_EQ(g.command_count(), 0u);
  q.wait();
}

// copy_to_host is a reader like any other: it sees the kernel before it, a later writer waits
// for it, and the host sees the bytes once its event completes (the host can run ahead).
TEST(Buffers, NonBlockingReadToHost) {
  auto& q = default_queue();
  const std::size_t n = 64;
  buffer<int> a(q, n);
  q.fill(a, 5);
  auto k = test_program(q.get_context()).get_kernel("add_const");
  buffer<int> b(q, n);
  q.submit([&](handler& h) {
    accessor<int> i(a, h, read_only);
    accessor<int> o(b, h, discard_write);
    h.parallel_for(range<1>(n), k, i, o, 3);
  });
  std::vector<int> first(n, -1), second(n, -1);
  event e1 = q.submit([&](handler& h) {
    accessor<int> s(b, h, read_only);
    h.copy_to_host(s, first.data(), n * sizeof(int));
  });
  q.fill(b, 9);  // a later writer: must not reach the read above
  event e2 = q.submit([&](handler& h) {
    accessor<int> s(b, h, read_only);
    h.copy_to_host(s, second.data() + 1, (n - 1) * sizeof(int), sizeof(int));
  });
  e1.wait();
  EXPECT_EQ(first, std::vector<int>(n, 8));
  e2.wait();
  EXPECT_EQ(second[0], -1);
  EXPECT_EQ(std::vector<int>(second.begin() + 1, second.end()), std::vector<int>(n - 1, 9));
  try {
    q.submit([&](handler& h) {
      accessor<int> s(b, h, read_only);
      h.copy_to_host(s, first.data(), 8, n * sizeof(int) - 4);
    });
    FAIL() << "a read past the buffer's end was accepted";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("copy_to_host"), std::string::npos) << e.what();
  }
}

TEST(Buffers, OutOfRangeAccessIsAnError) {
  auto& q = default_queue();
  buffer<int> b(q, 10);
  std::vector<int> big(11);
  try {
    b.read(big);
    FAIL() << "read past the end";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  EXPECT_THROW(b.write(big), error);
  EXPECT_THROW(q.submit([&](handler& h) {
    accessor<int> d(b, h, write_only);
    h.fill(d, 1, 10, 5);
  }),
               error);
}

TEST(Buffers, LargerThanTheDeviceAllowsIsOutOfMemory) {
  auto& q = default_queue();
  const std::uint64_t limit = q.get_device().max_mem_alloc_size();
  const std::size_t count = static_cast<std::size_t>(limit / sizeof(float)) + 1;
  try {
    buffer<float> b(q, count);
    FAIL() << "allocated " << count * sizeof(float) << " bytes above the limit " << limit;
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);
    std::string what = e.what();
    EXPECT_NE(what.find(std::to_string(count * sizeof(float))), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(limit)), std::string::npos) << what;
  }
  try {
    auto p = malloc_device<float>(count, q);
    FAIL() << "malloc_device above the limit";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory);
  }
  // The runtime stays usable afterwards.
  buffer<int> small(q, 4);
  q.fill(small, 3);
  EXPECT_EQ(small.read(), std::vector<int>(4, 3));
}

TEST(Buffers, ReaderListStaysShort) {
  // Readers on one in-order lane supersede each other: the dependency state of a buffer that is
  // only ever read must not grow with the number of commands (nor keep their events alive).
  auto& q = default_queue();
  auto k = test_program(q.get_context()).get_kernel("add_const");
  buffer<int> in(q, 16), out(q, 16);
  q.fill(in, 1);
  for (int i = 0; i < 100; ++i)
    q.submit([&](handler& h) {
      accessor<int> a(in, h, read_only);
      accessor<int> b(out, h, discard_write);
      h.parallel_for(range<1>(16), k, a, b, i);
    });
  q.wait();
  std::lock_guard lock(in.get_impl()->mutex);
  EXPECT_LE(in.get_impl()->readers.size(), 1u);
}
