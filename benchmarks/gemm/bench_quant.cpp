// Weight-only quantized GEMV (linear at M = 1, decode) against the device's read bandwidth:
// each q8_0 / q4_0 / q4_1 (and f32 for scale) GEMV iteration is followed by a paired read
// reference, `sum` over 64 MiB of f32 (a read-only kernel past the 32 MiB LLC), so load changes
// on a shared machine move both. x_read = weight GB/s / read GB/s (issue 17: >= 0.7).
// PRISM_DEVICE picks the device; PRISM_BENCH_VENDOR overrides the tune_configs profile;
// PRISM_BENCH_QCONFIG replaces the config (e.g. variant=0,qrn=8,qwg=1).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>

#include "benchmarks/bench_common.hpp"
#include "kernels/op_descriptor.hpp"

namespace {

using namespace prism;
using bench::bench_queue;

struct timed_call {
  const op_descriptor* d;
  op_call call;
  kernel_config cfg;
  double seconds() {
    queue& q = bench_queue();
    const auto t0 = std::chrono::steady_clock::now();
    enqueue_opencl(q, *d, call, cfg);
    q.wait();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

timed_call make(const char* op, const char* key, dtype t, const char* config_var) {
  queue& q = bench_queue();
  const op_descriptor& d = op_registry::instance().get(op);
  sample_options o;
  o.type = t;
  o.seed = 1;
  timed_call c{&d, d.sample(q, shape_key::parse(key), o),
               bench::tune_space_of(d, "PRISM_BENCH_VENDOR").defaults};
  if (const char* v = config_var ? std::getenv(config_var) : nullptr)
    c.cfg = d.config.complete(kernel_config::parse(v));
  c.seconds();  // build + warm up
  return c;
}

timed_call& read_reference() {
  static auto* r = new timed_call(make("sum", "outer=4096,r=4096,inner=1", dtype::f32, nullptr));
  return *r;
}

void bm_gemv(benchmark::State& state, const char* key, dtype t) {
  timed_call g = make("linear", key, t, "PRISM_BENCH_QCONFIG");
  timed_call& ref = read_reference();
  const double weight_bytes = static_cast<double>(g.call.inputs[1].nbytes());
  double seconds = 0, ref_seconds = 0;
  for (auto _ : state) {
    const double dt = g.seconds();
    state.SetIterationTime(dt);
    seconds += dt;
    ref_seconds += ref.seconds();
  }
  const double n = static_cast<double>(state.iterations());
  const double read_bytes = static_cast<double>(ref.call.inputs[0].nbytes()) * n;
  const double gbs = weight_bytes * n / seconds / 1e9, read_gbs = read_bytes / ref_seconds / 1e9;
  state.counters["weight_GB/s"] = gbs;
  state.counters["read_GB/s"] = read_gbs;
  state.counters["x_read"] = gbs / read_gbs;
  state.SetLabel(g.cfg.str());
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // [16384, 4096] weights: q8_0 71 MB, q4_0 38 MB, q4_1 42 MB, f32 268 MB (all past the LLC).
  const char* key = "m=1,n=16384,k=4096";
  for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::q4_1, dtype::f32}) {
    const std::string name = std::string("linear_gemv/") + dtype_name(t) + "/" + key;
    benchmark::RegisterBenchmark(name.c_str(), [key, t](benchmark::State& s) { bm_gemv(s, key, t); })
        ->UseManualTime()
        ->MinTime(1.0);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
