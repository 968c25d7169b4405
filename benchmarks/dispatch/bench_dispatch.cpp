// SPDX-License-Identifier: Apache-2.0
// Dispatch overhead: ops::add through the dispatcher (op_call build, argument checks, memoized
// routing and config lookup, logging off) versus enqueuing the same OpenCL implementation
// directly with the same config, in one process. The difference per call is the dispatch cost.
#include <benchmark/benchmark.h>

#include <vector>

#include "dispatch/backends/clblast/clblast_backend.hpp"
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

// The descriptor's argument checks alone (part of the dispatch path above).
void BM_check_call(benchmark::State& state) {
  auto& f = get(state.range(0));
  const auto& desc = op_registry::instance().get("add");
  for (auto _ : state) check_call(desc, f.call);
}

// Attribute completion on a complete call (the dispatcher runs it before the memo lookup;
// part of BM_dispatch_path_only).
void BM_complete_attrs(benchmark::State& state) {
  auto& f = get(state.range(0));
  const auto& desc = op_registry::instance().get("add");
  for (auto _ : state) complete_attrs(desc, f.call);
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

// CLBlast parameter switching: the same set on every call (applied once, then skipped) versus
// alternating two sets of XGEMM_MIN_INDIRECT_SIZE (direct vs indirect kernel), each call waited.
struct gemm_fixture {
  queue q;
  op_call call;
  explicit gemm_fixture(std::int64_t n) : q(default_selector_v) {
    const auto& desc = op_registry::instance().get("mm");
    call = desc.sample(q, shape_key{{"m", n}, {"n", n}, {"k", n}}, sample_options{});
    problem = desc.gemm(call);
  }
  gemm_problem problem;
};

gemm_fixture& gemm(std::int64_t n) {
  static auto* f = new gemm_fixture(n);
  return *f;
}

void BM_clblast_same_params(benchmark::State& state) {
  auto& f = gemm(state.range(0));
  auto params = dispatch::clblast::parse_parameters("XGEMM_MIN_INDIRECT_SIZE=64");
  dispatch::clblast::run(f.q, f.problem, params).wait();
  for (auto _ : state) dispatch::clblast::run(f.q, f.problem, params).wait();
}

void BM_clblast_alternating_params(benchmark::State& state) {
  auto& f = gemm(state.range(0));
  const kernel_config sets[2] = {dispatch::clblast::parse_parameters("XGEMM_MIN_INDIRECT_SIZE=64"),
                                 dispatch::clblast::parse_parameters("XGEMM_MIN_INDIRECT_SIZE=4096")};
  int i = 0;
  auto before = dispatch::clblast::switching_statistics();
  for (auto _ : state) dispatch::clblast::run(f.q, f.problem, sets[i++ & 1]).wait();
  auto after = dispatch::clblast::switching_statistics();
  state.counters["applied"] = static_cast<double>(after.applied - before.applied);
  dispatch::clblast::run(f.q, f.problem, {}).wait();
}

}  // namespace

BENCHMARK(BM_clblast_same_params)->Arg(256)->Iterations(20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_clblast_alternating_params)->Arg(256)->Iterations(20)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_direct_enqueue)->Arg(1024);
BENCHMARK(BM_dispatch_call)->Arg(1024);
BENCHMARK(BM_ops_add_out)->Arg(1024);
BENCHMARK(BM_dispatch_path_only)->Arg(1024);
BENCHMARK(BM_build_op_call)->Arg(1024);
BENCHMARK(BM_check_call)->Arg(1024);
BENCHMARK(BM_complete_attrs)->Arg(1024);
BENCHMARK_MAIN();
