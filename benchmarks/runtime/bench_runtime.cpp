// SPDX-License-Identifier: Apache-2.0
// Empty-kernel submit latency and buffer copy bandwidth: prism next to the raw OpenCL calls it
// wraps, on the same device (PRISM_DEVICE), context and kernel. Targets: submit <= max(1.1x raw,
// raw + 1 us); copy bandwidth >= 0.95x raw. Both sides wait every `batch` submits.
#include <benchmark/benchmark.h>

#include "prism/interop/opencl.hpp"
#include "prism/runtime.hpp"

namespace {
constexpr int batch = 256;

struct fixture {
  prism::queue q;
  prism::kernel empty, args;
  cl_command_queue raw_q = nullptr;
  cl_kernel raw_empty = nullptr, raw_args = nullptr;
  fixture() {
    auto prog = prism::program::build(q.get_context(), R"CLC(
      kernel void empty_kernel() {}
      kernel void args_kernel(global float* a, global const float* b, float s) {}
    )CLC");
    empty = prog.get_kernel("empty_kernel");
    args = prog.get_kernel("args_kernel");
    // The raw side gets its own in-order queue and kernel objects on the same context.
    cl_int st = CL_SUCCESS;
    raw_q = clCreateCommandQueueWithProperties(prism::interop::native(q.get_context())(),
                                               prism::interop::native(q.get_device())(), nullptr, &st);
    cl_program p = prism::interop::native(prog)();
    raw_empty = clCreateKernel(p, "empty_kernel", &st);
    raw_args = clCreateKernel(p, "args_kernel", &st);
  }
};
fixture& fx() {
  static auto* f = new fixture;  // never destroyed: no OpenCL from static destructors
  return *f;
}

void raw_empty_kernel(benchmark::State& state) {
  auto& f = fx();
  const std::size_t global = 1;
  int n = 0;
  for (auto _ : state) {
    cl_event ev = nullptr;
    clEnqueueNDRangeKernel(f.raw_q, f.raw_empty, 1, nullptr, &global, nullptr, 0, nullptr, &ev);
    clReleaseEvent(ev);
    if (++n % batch == 0) clFinish(f.raw_q);
  }
  clFinish(f.raw_q);
}
BENCHMARK(raw_empty_kernel)->Name("submit_empty/raw_clEnqueueNDRangeKernel")->UseRealTime();

void prism_empty_kernel(benchmark::State& state) {
  auto& f = fx();
  int n = 0;
  for (auto _ : state) {
    f.q.submit([&](prism::handler& h) { h.parallel_for(prism::range<1>(1), f.empty); });
    if (++n % batch == 0) f.q.wait();
  }
  f.q.wait();
}
BENCHMARK(prism_empty_kernel)->Name("submit_empty/prism_queue_submit")->UseRealTime();

void raw_args_kernel(benchmark::State& state) {
  auto& f = fx();
  prism::buffer<float> a(f.q, 1024), b(f.q, 1024);
  cl_mem ma = prism::interop::native(a), mb = prism::interop::native(b);
  const std::size_t global = 1;
  float s = 2.0f;
  int n = 0;
  for (auto _ : state) {
    clSetKernelArg(f.raw_args, 0, sizeof(cl_mem), &ma);
    clSetKernelArg(f.raw_args, 1, sizeof(cl_mem), &mb);
    clSetKernelArg(f.raw_args, 2, sizeof(float), &s);
    cl_event ev = nullptr;
    clEnqueueNDRangeKernel(f.raw_q, f.raw_args, 1, nullptr, &global, nullptr, 0, nullptr, &ev);
    clReleaseEvent(ev);
    if (++n % batch == 0) clFinish(f.raw_q);
  }
  clFinish(f.raw_q);
}
BENCHMARK(raw_args_kernel)->Name("submit_2buf_1scalar/raw_clEnqueueNDRangeKernel")->UseRealTime();

void prism_args_kernel(benchmark::State& state) {
  auto& f = fx();
  prism::buffer<float> a(f.q, 1024), b(f.q, 1024);
  int n = 0;
  for (auto _ : state) {
    f.q.submit([&](prism::handler& h) {
      prism::accessor<float> wa(a, h, prism::read_write);
      prism::accessor<float> rb(b, h, prism::read_only);
      h.parallel_for(prism::range<1>(1), f.args, wa, rb, 2.0f);
    });
    if (++n % batch == 0) f.q.wait();
  }
  f.q.wait();
}
BENCHMARK(prism_args_kernel)->Name("submit_2buf_1scalar/prism_queue_submit")->UseRealTime();

void raw_copy(benchmark::State& state) {
  auto& f = fx();
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  prism::buffer<char> a(f.q, bytes), b(f.q, bytes);
  f.q.fill(a, char{1});
  f.q.wait();
  cl_mem ma = prism::interop::native(a), mb = prism::interop::native(b);
  for (auto _ : state) {
    clEnqueueCopyBuffer(f.raw_q, ma, mb, 0, 0, bytes, 0, nullptr, nullptr);
    clFinish(f.raw_q);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(raw_copy)->Name("copy/raw_clEnqueueCopyBuffer")->Arg(64 << 20)->UseRealTime();

void prism_copy(benchmark::State& state) {
  auto& f = fx();
  const std::size_t bytes = static_cast<std::size_t>(state.range(0));
  prism::buffer<char> a(f.q, bytes), b(f.q, bytes);
  f.q.fill(a, char{1});
  f.q.wait();
  for (auto _ : state) {
    f.q.copy(a, b);
    f.q.wait();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(prism_copy)->Name("copy/prism_queue_copy")->Arg(64 << 20)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
