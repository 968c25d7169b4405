// SPDX-License-Identifier: Apache-2.0
// Wall time per kernel for N tiny dependent kernels (each increments one int the previous one
// wrote), in one process on one device (PRISM_DEVICE): raw OpenCL pipelined on an in-order
// queue (the floor), raw OpenCL with a clFinish after each kernel, prism eager submits, and a
// prism graph replayed as a launch list and as a cl_khr_command_buffer. Target: replay within
// 0.5 us per kernel of the raw pipelined floor. Every round ends with a wait.
#include <benchmark/benchmark.h>

#include <algorithm>

#include "prism/interop/opencl.hpp"
#include "prism/runtime.hpp"

namespace {
constexpr int kernels_per_round = 200;

struct fixture {
  prism::queue q;
  prism::program prog;
  prism::kernel inc;
  prism::buffer<int> counter{q, 1};
  cl_command_queue raw_q = nullptr;
  cl_kernel raw_inc = nullptr;
  cl_mem raw_counter = nullptr;
  prism::graph list, cmdbuf;
  fixture() {
    prog = prism::program::build(q.get_context(), "kernel void inc(global int* a) { a[0] += 1; }");
    inc = prog.get_kernel("inc");
    cl_int st = CL_SUCCESS;
    raw_q = clCreateCommandQueueWithProperties(prism::interop::native(q.get_context())(),
                                               prism::interop::native(q.get_device())(), nullptr, &st);
    raw_inc = clCreateKernel(prism::interop::native(prog)(), "inc", &st);
    raw_counter = clCreateBuffer(prism::interop::native(q.get_context())(), CL_MEM_READ_WRITE, sizeof(int),
                                 nullptr, &st);
    clSetKernelArg(raw_inc, 0, sizeof(cl_mem), &raw_counter);
    q.fill(counter, 0);
    auto body = [&] {
      for (int i = 0; i < kernels_per_round; ++i) submit_one();
    };
    list = prism::graph::record(q, body, {.mode = prism::graph_mode::launch_list});
    auto ext = q.get_device().extensions();
    if (std::find(ext.begin(), ext.end(), "cl_khr_command_buffer") != ext.end())
      cmdbuf = prism::graph::record(q, body, {.mode = prism::graph_mode::command_buffer});
    q.wait();
  }
  void submit_one() {
    q.submit([&](prism::handler& h) {
      prism::accessor<int> c(counter, h, prism::read_write);
      h.parallel_for(prism::range<1>(1), inc, c);
    });
  }
};
fixture& fx() {
  static auto* f = new fixture;  // never destroyed: no OpenCL from static destructors
  return *f;
}

/// Seconds per kernel, and a check that every kernel ran: the counter must have advanced by
/// kernels_per_round per iteration.
void per_kernel(benchmark::State& state, int before, int after) {
  state.counters["per_kernel"] =
      benchmark::Counter(static_cast<double>(kernels_per_round),
                         benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  if (static_cast<std::int64_t>(after) - before !=
      static_cast<std::int64_t>(state.iterations()) * kernels_per_round)
    state.SkipWithError("the counter did not advance by one per kernel: kernels were lost");
}
int raw_value(fixture& f) {
  int v = 0;
  clEnqueueReadBuffer(f.raw_q, f.raw_counter, CL_TRUE, 0, sizeof v, &v, 0, nullptr, nullptr);
  return v;
}
int prism_value(fixture& f) {
  return f.counter.read()[0];
}

void raw_pipelined(benchmark::State& state) {
  auto& f = fx();
  const int before = raw_value(f);
  const std::size_t one = 1;
  for (auto _ : state) {
    for (int i = 0; i < kernels_per_round; ++i)
      clEnqueueNDRangeKernel(f.raw_q, f.raw_inc, 1, nullptr, &one, nullptr, 0, nullptr, nullptr);
    clFinish(f.raw_q);
  }
  per_kernel(state, before, raw_value(f));
}
BENCHMARK(raw_pipelined)->Name("chain200/raw_opencl_pipelined")->UseRealTime();

void raw_finish_each(benchmark::State& state) {
  auto& f = fx();
  const int before = raw_value(f);
  const std::size_t one = 1;
  for (auto _ : state) {
    for (int i = 0; i < kernels_per_round; ++i) {
      clEnqueueNDRangeKernel(f.raw_q, f.raw_inc, 1, nullptr, &one, nullptr, 0, nullptr, nullptr);
      clFinish(f.raw_q);
    }
  }
  per_kernel(state, before, raw_value(f));
}
BENCHMARK(raw_finish_each)->Name("chain200/raw_opencl_finish_each")->UseRealTime();

void prism_eager(benchmark::State& state) {
  auto& f = fx();
  const int before = prism_value(f);
  for (auto _ : state) {
    for (int i = 0; i < kernels_per_round; ++i) f.submit_one();
    f.q.wait();
  }
  per_kernel(state, before, prism_value(f));
}
BENCHMARK(prism_eager)->Name("chain200/prism_eager")->UseRealTime();

void prism_graph_list(benchmark::State& state) {
  auto& f = fx();
  const int before = prism_value(f);
  for (auto _ : state) {
    f.list.replay(f.q);
    f.q.wait();
  }
  per_kernel(state, before, prism_value(f));
}
BENCHMARK(prism_graph_list)->Name("chain200/prism_graph_launch_list")->UseRealTime();

void prism_graph_cmdbuf(benchmark::State& state) {
  auto& f = fx();
  if (!f.cmdbuf) {
    state.SkipWithError("the device has no cl_khr_command_buffer");
    return;
  }
  const int before = prism_value(f);
  for (auto _ : state) {
    f.cmdbuf.replay(f.q);
    f.q.wait();
  }
  per_kernel(state, before, prism_value(f));
}
BENCHMARK(prism_graph_cmdbuf)->Name("chain200/prism_graph_command_buffer")->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
