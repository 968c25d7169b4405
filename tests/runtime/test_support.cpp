// SPDX-License-Identifier: Apache-2.0
// The runtime tests' shared queue, test kernels and slow-kernel calibration.
#include "tests/runtime/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

namespace prism::test {
namespace {
const char* kernels_source = R"CLC(
kernel void empty_kernel() {}
kernel void iota(global int* out, int base) { out[get_global_id(0)] = base + (int)get_global_id(0); }
kernel void add_const(global const int* in, global int* out, int c) {
  size_t i = get_global_id(0);
  out[i] = in[i] + c;
}
kernel void group_info(global int* out) {
  size_t i = get_global_id(0);
  out[i] = (int)get_local_size(0);
}
kernel void local_reverse(global const int* in, global int* out, local int* scratch) {
  size_t l = get_local_id(0), n = get_local_size(0), g = get_group_id(0);
  scratch[l] = in[g * n + l];
  barrier(CLK_LOCAL_MEM_FENCE);
  out[g * n + l] = scratch[n - 1 - l];
}
// Which of a and b came as NULL (bit 0: a, bit 1: b), plus what each non-NULL one holds.
kernel void null_args(global const int* a, global const int* b, global int* out) {
  out[0] = (a == 0 ? 1 : 0) | (b == 0 ? 2 : 0);
  out[1] = a ? a[0] : -1;
  out[2] = b ? b[0] : -1;
}
// Spins `iters` steps, then writes v: a slow writer.
kernel void slow_write(global int* a, int v, int iters) {
  size_t i = get_global_id(0);
  float x = (float)i;
  for (int k = 0; k < iters; ++k) x = x * 0.999999f + 0.5f;
  a[i] = (x == -1.0f) ? 0 : v;
}
// Spins, then copies a into b: a slow reader of a.
kernel void slow_copy(global const int* a, global int* b, int iters) {
  size_t i = get_global_id(0);
  float x = (float)i;
  for (int k = 0; k < iters; ++k) x = x * 0.999999f + 0.5f;
  b[i] = (x == -1.0f) ? 0 : a[i];
}
kernel void copy_int(global const int* a, global int* b) { b[get_global_id(0)] = a[get_global_id(0)]; }
kernel void add_param(global const int* in, global int* out, global const int* c) {
  size_t i = get_global_id(0);
  out[i] = in[i] + c[0];
}
)CLC";
}  // namespace

queue& default_queue() {
  static auto* q = new queue();  // never destroyed: no OpenCL from static destructors
  return *q;
}

program test_program(const context& ctx) {
  return program::build(ctx, kernels_source, "-cl-std=CL1.2");
}

int slow_iterations(queue& q) {
  static int iters = [&] {
    auto k = test_program(q.get_context()).get_kernel("slow_write");
    buffer<int> a(q, 64);
    int n = 1 << 16;
    for (;;) {
      auto t0 = std::chrono::steady_clock::now();
      q.submit([&](handler& h) {
        accessor<int> acc(a, h, write_only);
        h.parallel_for(range<1>(64), k, acc, 1, n);
      });
      q.wait();
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (ms >= 100.0 || n >= (1 << 29)) return n;
      double next = ms < 5.0 ? n * 8.0 : n * (120.0 / ms);
      n = static_cast<int>(std::min(next, double(1 << 29)));
    }
  }();
  return iters;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error was thrown";
  return {};
}

}  // namespace prism::test
