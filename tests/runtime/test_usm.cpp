// SPDX-License-Identifier: Apache-2.0
// USM-style allocations: device pointers backed by cl_mem, optional SVM, memcpy/fill/copy.
#include <gtest/gtest.h>

#include <numeric>

#include "prism/runtime.hpp"
#include "tests/runtime/test_support.hpp"

using namespace prism;
using prism::test::default_queue;
using prism::test::message_of;
using prism::test::test_program;

TEST(Usm, DeviceRoundTripFillCopyAndKernel) {
  auto& q = default_queue();
  const std::size_t n = 1001;
  auto a = malloc_device<int>(n, q);
  auto b = malloc_device<int>(n, q);
  EXPECT_EQ(a.capacity(), n);
  EXPECT_EQ(a.svm_data(), nullptr);
  std::vector<int> host(n);
  std::iota(host.begin(), host.end(), -50);
  q.copy(host.data(), a, n);
  std::vector<int> back(n);
  q.copy(a, back.data(), n).wait();
  EXPECT_EQ(back, host);
  // Offsets in elements.
  q.fill(a + 1000, 77, 1);
  q.copy(a, b, n);
  auto k = test_program(q.get_context()).get_kernel("add_const");
  q.submit([&](handler& h) { h.parallel_for(range<1>(n), k, b, a, 1); });
  q.memcpy(back.data(), a, n * sizeof(int)).wait();
  EXPECT_EQ(back[0], -49);
  EXPECT_EQ(back[999], 950);
  EXPECT_EQ(back[1000], 78);
  EXPECT_THROW(q.copy(host.data(), a + 1, n), error) << "copy past the end of the allocation";
  free(a);
  EXPECT_FALSE(a);
}

// A transfer past the end of an allocation is refused naming the call, its side and the range.
TEST(Usm, ATransferPastTheAllocationNamesTheRange) {
  auto& q = default_queue();
  const std::size_t n = 1001;
  auto a = malloc_device<int>(n, q);
  std::vector<int> host(n);
  const std::string why = message_of([&] { q.copy(host.data(), a + 1, n); });
  EXPECT_NE(why.find("queue::memcpy (destination)"), std::string::npos) << why;
  EXPECT_NE(why.find("range [4, 4008) is outside an allocation of 4004 bytes"), std::string::npos) << why;
  free(a);
}

TEST(Usm, SvmRoundTripOrUnsupported) {
  auto& q = default_queue();
  if (!q.get_device().has_svm()) {
    try {
      malloc_svm<int>(16, q);
      FAIL() << "malloc_svm on a device without SVM";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::unsupported);
    }
    return;
  }
  auto p = malloc_svm<int>(16, q);
  ASSERT_NE(p.svm_data(), nullptr);
  q.fill(p, 9, 16).wait();
  std::vector<int> back(16);
  q.copy(p, back.data(), 16).wait();
  EXPECT_EQ(back, std::vector<int>(16, 9));
}
