// Host memory on CPU devices: buffers over foreign host memory (buffer::wrap_host, the Python
// module's zero-copy path), where kernels read and write the memory itself and the owner outlives
// every user; prism's own huge-page memory for large buffers; and idle_poll, which keeps idle CPUs
// polling for the device's worker threads.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "prism/error.hpp"
#include "prism/runtime.hpp"
#include "runtime/env.hpp"
#include "tests/runtime/test_support.hpp"

using namespace prism;
using prism::test::default_queue;
using prism::test::test_program;

namespace {
// 128-byte aligned host memory owned by a shared_ptr whose deleter records that it ran.
std::shared_ptr<int> aligned_ints(std::size_t n, bool* freed) {
  void* p = std::aligned_alloc(128, ((n * sizeof(int) + 127) / 128) * 128);
  return std::shared_ptr<int>(static_cast<int*>(p), [freed](int* q) {
    *freed = true;
    std::free(q);
  });
}

// out[i] = in[i] + c on the device.
void add_value(queue& q, buffer<int>& in, buffer<int>& out, int c) {
  auto k = test_program(q.get_context()).get_kernel("add_const");
  q.submit([&](handler& h) {
    accessor<int> a(in, h, read_only);
    accessor<int> b(out, h, discard_write);
    h.parallel_for(range<1>(in.size()), k, a, b, c);
  });
}
}  // namespace

TEST(HostMemory, KernelsReadAndWriteTheWrappedMemory) {
  auto& q = default_queue();
  const std::size_t n = 1000;
  bool in_freed = false, out_freed = false;
  auto in_mem = aligned_ints(n, &in_freed);
  auto out_mem = aligned_ints(n, &out_freed);
  std::iota(in_mem.get(), in_mem.get() + n, 5);
  std::fill(out_mem.get(), out_mem.get() + n, -1);
  {
    auto in = buffer<int>::wrap_host(q.get_context(), in_mem.get(), n, in_mem);
    auto out = buffer<int>::wrap_host(q.get_context(), out_mem.get(), n, out_mem);
    EXPECT_EQ(in.host_memory(), in_mem.get());
    EXPECT_EQ(out.size(), n);
    add_value(q, in, out, 3);
    {
      // A map synchronises the host memory; where the device shares host memory (CPU devices)
      // it is the wrapped memory itself: no copy.
      host_accessor<int> view(out, read_only);
      if (q.get_device().type() == device_type::cpu) EXPECT_EQ(view.data(), out_mem.get());
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(view[i], static_cast<int>(i) + 8) << "element " << i;
    }
    // The results are in the caller's memory.
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(out_mem.get()[i], static_cast<int>(i) + 8) << "element " << i;
    // Host writes to the wrapped memory are what the next command reads (CPU devices).
    if (q.get_device().type() == device_type::cpu) {
      in_mem.get()[0] = 100;
      add_value(q, in, out, 1);
      EXPECT_EQ(out.read()[0], 101);
    }
  }
  // The buffers kept the owners alive; they are the last holders now.
  EXPECT_FALSE(in_freed);
  in_mem.reset();
  out_mem.reset();
  EXPECT_TRUE(in_freed);
  EXPECT_TRUE(out_freed);
}

TEST(HostMemory, OwnerOutlivesPendingCommands) {
  auto& q = default_queue();
  const std::size_t n = 64;  // slow_iterations() makes 64 items take ~100 ms
  // The owner's deleter records whether the command using the memory had finished.
  auto done = std::make_shared<event>();
  bool freed_while_running = false, freed = false;
  {
    void* p = std::aligned_alloc(128, n * sizeof(int));
    std::fill(static_cast<int*>(p), static_cast<int*>(p) + n, 1);
    std::shared_ptr<int> mem(static_cast<int*>(p), [&, done](int* m) {
      freed = true;
      freed_while_running = done->status() != event_status::complete;
      std::free(m);
    });
    int* data = mem.get();  // before the move: argument order is unspecified
    auto buf = buffer<int>::wrap_host(q.get_context(), data, n, std::move(mem));
    buffer<int> out(q, n);
    auto k = test_program(q.get_context()).get_kernel("slow_copy");
    *done = q.submit([&](handler& h) {
      accessor<int> a(buf, h, read_only);
      accessor<int> b(out, h, discard_write);
      h.parallel_for(range<1>(n), k, a, b, prism::test::slow_iterations(q));
    });
    // `buf` goes with its command still running: its destructor must wait for it before the
    // owner frees the memory.
  }
  EXPECT_TRUE(freed);
  EXPECT_FALSE(freed_while_running);
  q.wait();
}

TEST(HostMemory, EmptyAndNullMemory) {
  auto& q = default_queue();
  auto empty = buffer<int>::wrap_host(q.get_context(), nullptr, 0, nullptr);
  EXPECT_EQ(empty.size(), 0u);
  try {
    buffer<int>::wrap_host(q.get_context(), nullptr, 4, nullptr);
    FAIL() << "a null pointer for 16 bytes was accepted";
  } catch (const prism::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("null host pointer"), std::string::npos) << e.what();
  }
}

// Large buffers on CPU devices live on prism's own 2 MiB-aligned pages, advised for transparent
// huge pages (PRISM_HUGE_PAGES, runtime/buffer.cpp): the device reads and writes them in place,
// so a map of the buffer is that memory.
namespace {
struct env_setting {
  explicit env_setting(std::optional<std::string> v) { env::override_for_testing("PRISM_HUGE_PAGES", v); }
  ~env_setting() { env::override_for_testing("PRISM_HUGE_PAGES", std::nullopt); }
};
constexpr std::uintptr_t two_mib = std::uintptr_t{2} << 20;
}  // namespace

TEST(HugePages, LargeCpuBuffersLieOnAlignedPagesOfTheirOwn) {
  auto& q = default_queue();
  if (q.get_device().type() != device_type::cpu) GTEST_SKIP() << "huge pages are for CPU devices";
  const std::size_t n =
      (std::size_t{33} << 20) / sizeof(int) + 3;  // over the 32 MiB default, not a page multiple
  std::vector<int> host(n);
  std::iota(host.begin(), host.end(), -7);
  buffer<int> in(q, host.data(), n);
  buffer<int> out(q.get_context(), n);
  add_value(q, in, out, 3);
  {
    host_accessor<int> view(out, read_only);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(view.data()) % two_mib, 0u);
    EXPECT_EQ(out.host_memory(), nullptr);  // prism's own memory, not a caller's
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(view[i], static_cast<int>(i) - 4) << "element " << i;
  }
  {
    // The threshold in bytes: a 1.5 MiB buffer gets its own pages too.
    env_setting s(std::string("1048576"));
    buffer<int> small(q, host.data(), (std::size_t{3} << 19) / sizeof(int));
    host_accessor<int> view(small, read_only);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(view.data()) % two_mib, 0u);
    EXPECT_EQ(view[10], 3);
  }
  {
    // off: the device allocates, and the buffer still works.
    env_setting s(std::string("off"));
    buffer<int> plain(q, host.data(), n);
    host_accessor<int> view(plain, read_only);
    EXPECT_EQ(view[n - 1], static_cast<int>(n) - 8);
  }
}

TEST(HugePages, ABadSettingNamesTheVariableAndTheValidValues) {
  auto& q = default_queue();
  if (q.get_device().type() != device_type::cpu) GTEST_SKIP() << "huge pages are for CPU devices";
  env_setting s(std::string("lots"));
  try {
    buffer<int> b(q.get_context(), std::size_t{8} << 20);
    FAIL() << "PRISM_HUGE_PAGES=lots was accepted";
  } catch (const prism::error& e) {
    EXPECT_EQ(e.code(), errc::config_error);
    EXPECT_NE(std::string(e.what()).find("'lots' is not valid (valid: on, off"), std::string::npos)
        << e.what();
  }
}

// prism::idle_poll: while held, the kernel's CPU-latency target (read back from
// /dev/cpu_dma_latency, the least of every process's requests) is 0 µs, and this process has the
// file open; after release it no longer has. Where the request cannot be made (no write access),
// the object says why and opens nothing. (Other processes, such as prism-llm tests running
// beside this one, may hold requests of their own, so the value after release is not checked.)
namespace {
std::optional<std::int32_t> cpu_latency_target() {
  const int fd = ::open("/dev/cpu_dma_latency", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::int32_t v = -1;
  const bool ok = ::read(fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v);
  ::close(fd);
  return ok ? std::optional<std::int32_t>(v) : std::nullopt;
}

// How many of this process's file descriptors are open on /dev/cpu_dma_latency.
int latency_files_open() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec) == "/dev/cpu_dma_latency") ++n;
  }
  return n;
}
}  // namespace

TEST(IdlePoll, HoldsAZeroLatencyRequestOrSaysWhyNot) {
  EXPECT_EQ(latency_files_open(), 0);
  {
    idle_poll poll;
    if (poll.active()) {
      EXPECT_TRUE(poll.reason().empty());
      EXPECT_EQ(latency_files_open(), 1);
      if (const auto v = cpu_latency_target()) EXPECT_EQ(*v, 0);
    } else {
      EXPECT_NE(poll.reason().find("/dev/cpu_dma_latency"), std::string::npos) << poll.reason();
      EXPECT_EQ(latency_files_open(), 0);
    }
  }
  EXPECT_EQ(latency_files_open(), 0) << "the request outlived the object";
}
