// Dispatch overhead: ops::add through the dispatcher (op_call build, argument checks, memoized
// routing and config lookup, logging off) versus enqueuing the same OpenCL implementation
// directly with the same config, in one process. The difference per call is the dispatch cost.
#include <benchmark/benchmark.h>

#include <vector>

#include "dispatch/dispatcher.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/ops.hpp"
#include "prism/runtime.hpp"

namespace {

using namespace prism;

// Calls between queue waits (keeps the queue from growing); the waits are excluded from the
// timing, so the figures are the submitting thread's cost per call.
constexpr int batch = 256;

void drain(benchmark::State& state, queue& q) {
  state.PauseTiming();
  q.wait();
  state.ResumeTiming();
}

struct fixture {
  queue q;
  tensor a, b, out;
  op_call call;
  kernel_config config;
  const op_implementation* impl = nullptr;

  explicit fixture(std::int64_t n) : q(default_selector_v) {
    std::vector<float> v(static_cast<std::size_t>(n), 1.0f);
    a = tensor::from_floats(q, v, {n}, dtype::f32);
    b = tensor::from_floats(q, v, {n}, dtype::f32);
    out = tensor::empty(q, {n}, dtype::f32);
    call.op = "add";
    call.inputs = {a, b};
    call.outputs = {out};
    call.attrs = {{"alpha", 1.0}};
    // The config and implementation the dispatcher chose, so both paths run the same kernel.
    auto r = dispatch::dispatch_call(q, call);
    const auto& desc = op_registry::instance().get("add");
    config = kernel_config::parse(r.config);
    for (const auto& i : desc.implementations)
      if (i.name == r.implementation) impl = &i;
    q.wait();
  }
};

fixture& get(std::int64_t n) {
  static auto* f = new fixture(n);
  return *f;
}

void BM_direct_enqueue(benchmark::State& state) {
  auto& f = get(state.range(0));
  if (!f.impl) {
    state.SkipWithError("the dispatcher did not pick an opencl implementation for add");
    return;
  }
  int i = 0;
  for (auto _ : state) {
    f.impl->enqueue(f.q, f.call, f.config, std::nullopt);
    if (++i % batch == 0) drain(state, f.q);
  }
  f.q.wait();
}

void BM_dispatch_call(benchmark::State& state) {
  auto& f = get(state.range(0));
  int i = 0;
  for (auto _ : state) {
    dispatch::dispatch_call(f.q, f.call);
    if (++i % batch == 0) drain(state, f.q);
  }
  f.q.wait();
}

// The dispatch path without the launch: argument checks, signature, memo lookup, supports().
void BM_dispatch_path_only(benchmark::State& state) {
  auto& f = get(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(dispatch::plan_call(f.q, f.call));
}

// What ops::add_out adds on top of dispatch_call: building the op_call (vectors, attr map).
void BM_build_op_call(benchmark::State& state) {
  auto& f = get(state.range(0));
  for (auto _ : state) {
    op_call c;
    c.op = "add";
    c.inputs = {f.a, f.b};
    c.outputs = {f.out};
    c.attrs = {{"alpha", 1.0}};
    benchmark::DoNotOptimize(c);
  }
}

void BM_ops_add_out(benchmark::State& state) {
  auto& f = get(state.range(0));
  int i = 0;
  for (auto _ : state) {
    ops::add_out(f.q, f.out, f.a, f.b);
    if (++i % batch == 0) drain(state, f.q);
  }
  f.q.wait();
}

}  // namespace

BENCHMARK(BM_direct_enqueue)->Arg(1024);
BENCHMARK(BM_dispatch_call)->Arg(1024);
BENCHMARK(BM_ops_add_out)->Arg(1024);
BENCHMARK(BM_dispatch_path_only)->Arg(1024);
BENCHMARK(BM_build_op_call)->Arg(1024);
BENCHMARK_MAIN();
