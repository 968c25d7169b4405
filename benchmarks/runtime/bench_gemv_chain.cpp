// SPDX-License-Identifier: Apache-2.0
// The floor a decode step's weight streaming has on a device through raw OpenCL: the f32 GEMVs
// of one token of the 135M-parameter benchmark model (benchmarks/llm/make_bench_model.py:
// hidden 576, 30 layers, q|k|v 960, ffn 1536 with gate|up fused, vocab 49152 tied), each layer's
// qkv, o, gate|up and down projections and the output head: 121 dependent kernels over 538 MB of
// distinct weights, one weight row per work-item, 8 per group (the pocl profile's decode config),
// on an in-order queue with one finish per token. `one_kernel` streams the same bytes in one
// launch, so the difference is what the launches cost. prism-llm's decode of that model (same
// kernels plus norms and attention) compares against `chain`; llama.cpp's against both
// (RESULTS.md, "Issue 14, session 8"). PRISM_DEVICE picks the device; PRISM_BENCH_GEMV_LOCAL
// sets the work-group size (default 8).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

#include "prism/interop/opencl.hpp"
#include "prism/runtime.hpp"

namespace {

const char* const source = R"(
kernel void gemv(int N, int K, global const float* x, global const float* W, global float* y) {
  const int n = get_global_id(0);
  if (n >= N) return;
  const global float* w = W + (long)n * K;
  float16 acc = 0.0f;
  for (int k = 0; k < K; k += 16) acc = fma(vload16(0, x + k), vload16(0, w + k), acc);
  const float8 a8 = acc.lo + acc.hi;
  const float4 a4 = a8.lo + a8.hi;
  y[n] = (a4.s0 + a4.s1) + (a4.s2 + a4.s3);
}
)";

struct gemv_shape {
  int n, k;
};

struct fixture {
  prism::queue q;
  prism::program prog;
  cl_command_queue raw_q = nullptr;
  cl_kernel k = nullptr;
  std::vector<gemv_shape> chain, one;
  std::vector<cl_mem> weights, one_weight;
  cl_mem x = nullptr, y = nullptr;
  double bytes = 0;
  std::size_t local_size = 8;
  fixture() {
    if (const char* l = std::getenv("PRISM_BENCH_GEMV_LOCAL")) local_size = std::strtoul(l, nullptr, 10);
    for (int l = 0; l < 30; ++l) chain.insert(chain.end(), {{960, 576}, {576, 576}, {3072, 576}, {576, 1536}});
    chain.push_back({49152, 576});
    std::size_t total = 0;
    for (const auto& s : chain) total += static_cast<std::size_t>(s.n) * static_cast<std::size_t>(s.k);
    one.push_back({static_cast<int>(total / 576), 576});
    bytes = static_cast<double>(total) * 4.0;
    prog = prism::program::build(q.get_context(), source);
    cl_context ctx = prism::interop::native(q.get_context())();
    cl_device_id dev = prism::interop::native(q.get_device())();
    cl_int st = CL_SUCCESS;
    raw_q = clCreateCommandQueueWithProperties(ctx, dev, nullptr, &st);
    k = clCreateKernel(prism::interop::native(prog)(), "gemv", &st);
    auto make = [&](const gemv_shape& s) {
      const std::size_t n = static_cast<std::size_t>(s.n) * static_cast<std::size_t>(s.k);
      std::vector<float> h(n, 1e-3f);
      return clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, h.data(), &st);
    };
    for (const auto& s : chain) weights.push_back(make(s));
    one_weight.push_back(make(one[0]));
    std::vector<float> h(static_cast<std::size_t>(one[0].n), 1.0f);
    x = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, h.size() * 4, h.data(), &st);
    y = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, h.size() * 4, h.data(), &st);
  }
  // One token: every GEMV in order, ping-ponging x and y, then a finish.
  void token(const std::vector<gemv_shape>& shapes, const std::vector<cl_mem>& ws) {
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      cl_mem in = i % 2 ? y : x, out = i % 2 ? x : y;
      clSetKernelArg(k, 0, sizeof(int), &shapes[i].n);
      clSetKernelArg(k, 1, sizeof(int), &shapes[i].k);
      clSetKernelArg(k, 2, sizeof(cl_mem), &in);
      clSetKernelArg(k, 3, sizeof(cl_mem), &ws[i]);
      clSetKernelArg(k, 4, sizeof(cl_mem), &out);
      const std::size_t global_items = static_cast<std::size_t>(shapes[i].n);
      const std::size_t local = local_size, global = (static_cast<std::size_t>(shapes[i].n) + local - 1) / local * local;
      clEnqueueNDRangeKernel(raw_q, k, 1, nullptr, &global, &local, 0, nullptr, nullptr);
    }
    clFinish(raw_q);
  }
};
fixture& fx() {
  static auto* f = new fixture;  // never destroyed: no OpenCL from static destructors
  return *f;
}

void run(benchmark::State& state, bool chain) {
  auto& f = fx();
  f.token(chain ? f.chain : f.one, chain ? f.weights : f.one_weight);  // warm-up: build, fault in
  for (auto _ : state) f.token(chain ? f.chain : f.one, chain ? f.weights : f.one_weight);
  state.counters["kernels"] = static_cast<double>(chain ? f.chain.size() : 1);
  state.counters["weight_GB"] = benchmark::Counter(f.bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(run, chain, true)->Name("decode_gemvs_135m/chain")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(run, one_kernel, false)
    ->Name("decode_gemvs_135m/one_kernel")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
