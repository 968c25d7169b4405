// SPDX-License-Identifier: Apache-2.0
// GEMM benchmark: prism's mm/linear kernels vs CLBlast's default SGEMM vs OpenBLAS, same run,
// same shapes; prints GFLOP/s per library and a ratio table at the end. prism runs the config an
// untuned call gets: the vendor profile's route for the shape (its `when` entries, PRISM_ROUTES
// and PRISM_OP_<op> too) where that is prism's OpenCL backend, else the profile's default.
// Env: PRISM_DEVICE picks the device; PRISM_GEMM_CONFIG ("variant=1,tm=128,...") overrides the
// config of every prism run, PRISM_GEMM_SMALL_M_CONFIG that of M <= 16 runs; PRISM_GEMM_VENDOR
// (pocl|nvidia|generic) picks the tune_configs.yaml defaults (default: from the device);
// PRISM_GEMM_NO_BLAS=1 skips OpenBLAS, PRISM_GEMM_NO_CLBLAST=1 skips CLBlast; 4096^3 runs on
// GPUs or with PRISM_GEMM_BIG=1.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <clblast.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "benchmarks/bench_common.hpp"
#include "dispatch/dispatcher.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/interop/opencl.hpp"
#include "prism/runtime.hpp"
#include "prism/tensor.hpp"

namespace {

using namespace prism;
using bench::bench_queue;
using bench::env;
using bench::tune_space_of;
using bench::vendor_of;

struct shape {
  std::string name;
  std::int64_t m, n, k;
  bool nt;  // B stored as [n, k] (a linear layer's weight): the "linear" op, CLBlast/OpenBLAS transB
};

kernel_config config_for(const op_descriptor& d, op_call& call, std::int64_t m) {
  if (m <= 16)
    if (const char* c = env("PRISM_GEMM_SMALL_M_CONFIG")) return d.config.complete(kernel_config::parse(c));
  if (const char* c = env("PRISM_GEMM_CONFIG")) return d.config.complete(kernel_config::parse(c));
  if (!env("PRISM_GEMM_VENDOR")) {
    dispatch::dispatch_options untuned;
    untuned.skip_tuning_db = true;
    const dispatch::dispatch_result plan = dispatch::plan_call(bench_queue(), call, untuned);
    if (plan.backend == "opencl" && !plan.config.empty())
      return d.config.complete(kernel_config::parse(plan.config));
  }
  return tune_space_of(d, "PRISM_GEMM_VENDOR").defaults;
}

struct operands {
  tensor a, b, c;
  std::vector<float> ha, hb, hc;
};

operands& operands_for(const shape& s) {
  static auto* cache = new std::map<std::string, std::unique_ptr<operands>>();
  auto& slot = (*cache)[s.name];
  if (!slot) {
    slot = std::make_unique<operands>();
    queue& q = bench_queue();
    sample_options o;
    o.seed = 7;
    slot->ha.resize(static_cast<std::size_t>(s.m * s.k));
    slot->hb.resize(static_cast<std::size_t>(s.k * s.n));
    slot->hc.resize(static_cast<std::size_t>(s.m * s.n));
    for (std::size_t i = 0; i < slot->ha.size(); ++i)
      slot->ha[i] = static_cast<float>((i * 7) % 13) / 13.0f - 0.5f;
    for (std::size_t i = 0; i < slot->hb.size(); ++i)
      slot->hb[i] = static_cast<float>((i * 5) % 11) / 11.0f - 0.5f;
    slot->a = tensor::from_floats(q, slot->ha, {s.m, s.k}, dtype::f32);
    slot->b = tensor::from_floats(q, slot->hb, s.nt ? dims{s.n, s.k} : dims{s.k, s.n}, dtype::f32);
    slot->c = tensor::empty(q, {s.m, s.n}, dtype::f32);
  }
  return *slot;
}

std::map<std::string, std::map<std::string, double>>& results() {
  static auto* r = new std::map<std::string, std::map<std::string, double>>();
  return *r;
}

double flops(const shape& s) {
  return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
}

void finish(benchmark::State& st, const shape& s) {
  const double f = flops(s) * static_cast<double>(st.iterations());
  st.counters["GFLOP/s"] = benchmark::Counter(f * 1e-9, benchmark::Counter::kIsRate);
}

void bm_prism(benchmark::State& st, shape s) {
  queue& q = bench_queue();
  operands& o = operands_for(s);
  const op_descriptor& d = op_registry::instance().get(s.nt ? "linear" : "mm");
  op_call call{s.nt ? "linear" : "mm", {o.a, o.b}, {o.c}, {}};
  if (s.nt) call.inputs.push_back(tensor());
  const kernel_config cfg = config_for(d, call, s.m);
  st.SetLabel(cfg.str());
  enqueue_opencl(q, d, call, cfg).wait();  // build + warm up
  for (auto _ : st) enqueue_opencl(q, d, call, cfg).wait();
  finish(st, s);
}

void bm_clblast(benchmark::State& st, shape s) {
  queue& q = bench_queue();
  operands& o = operands_for(s);
  q.wait();
  cl_command_queue cq = interop::native(q)();
  cl_mem a = interop::native(o.a.storage()), b = interop::native(o.b.storage()),
         c = interop::native(o.c.storage());
  auto run = [&] {
    cl_event e = nullptr;
    auto status =
        clblast::Gemm<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo,
                             s.nt ? clblast::Transpose::kYes : clblast::Transpose::kNo, s.m, s.n, s.k, 1.0f,
                             a, 0, s.k, b, 0, s.nt ? s.k : s.n, 0.0f, c, 0, s.n, &cq, &e);
    if (status != clblast::StatusCode::kSuccess)
      throw std::runtime_error(fmt::format("CLBlast Gemm failed: {}", static_cast<int>(status)));
    clWaitForEvents(1, &e);
    clReleaseEvent(e);
  };
  run();
  for (auto _ : st) run();
  finish(st, s);
}

void bm_openblas(benchmark::State& st, shape s) {
  operands& o = operands_for(s);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, s.nt ? CblasTrans : CblasNoTrans, static_cast<int>(s.m),
                static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, o.ha.data(), static_cast<int>(s.k),
                o.hb.data(), static_cast<int>(s.nt ? s.k : s.n), 0.0f, o.hc.data(), static_cast<int>(s.n));
  };
  run();
  for (auto _ : st) run();
  finish(st, s);
}

std::vector<shape> shapes(bool big) {
  std::vector<shape> v;
  if (big) v.push_back({"mm_4096x4096x4096", 4096, 4096, 4096, false});  // GPUs (PRISM_GEMM_BIG=1 elsewhere)
  v.insert(v.end(),
           {{"mm_1024x1024x1024", 1024, 1024, 1024, false}, {"mm_128x4096x4096", 128, 4096, 4096, false}});
  for (std::int64_t m : {1, 16, 128})
    for (auto [n, k] : {std::pair<std::int64_t, std::int64_t>{4096, 4096}, {11008, 4096}, {4096, 11008}})
      v.push_back({fmt::format("linear_{}x{}x{}", m, n, k), m, n, k, true});
  return v;
}

// Collects each run's GFLOP/s for the ratio table.
class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      const std::string name = r.benchmark_name();
      const auto slash = name.find('/');
      auto it = r.counters.find("GFLOP/s");
      if (slash == std::string::npos || it == r.counters.end()) continue;
      const auto end = name.find('/', slash + 1);  // drop "/min_time:.../real_time"
      results()[name.substr(slash + 1, end == std::string::npos ? std::string::npos : end - slash - 1)]
               [name.substr(0, slash)] = it->second.value;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const bool blas = !env("PRISM_GEMM_NO_BLAS"), clb = !env("PRISM_GEMM_NO_CLBLAST");
  const bool big = env("PRISM_GEMM_BIG") || bench_queue().get_device().is_gpu();
  for (const shape& s : shapes(big)) {
    benchmark::RegisterBenchmark(("prism/" + s.name).c_str(), bm_prism, s)->UseRealTime()->MinTime(0.3);
    if (clb)
      benchmark::RegisterBenchmark(("clblast/" + s.name).c_str(), bm_clblast, s)->UseRealTime()->MinTime(0.3);
    if (blas)
      benchmark::RegisterBenchmark(("openblas/" + s.name).c_str(), bm_openblas, s)
          ->UseRealTime()
          ->MinTime(0.3);
  }
  const device& dev = bench_queue().get_device();
  fmt::print("device: {} ({}), tune vendor: {}\n", dev.name(), dev.platform_name(),
             vendor_of(dev, "PRISM_GEMM_VENDOR"));
  // Which OpenBLAS kernels the reference runs: a CPU model this OpenBLAS does not know gets its
  // SSE3 'Prescott' ones (OPENBLAS_CORETYPE picks others), and the ratios mean little then.
  if (blas)
    fmt::print("openblas: {}, core {}, {} threads\n", openblas_get_config(), openblas_get_corename(),
               openblas_get_num_threads());
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  fmt::print("\n{:<28} {:>10} {:>10} {:>10} {:>12} {:>12}\n", "shape", "prism", "clblast", "openblas",
             "x clblast", "x openblas");
  for (auto& [name, libs] : results()) {
    auto get = [&](const char* l) {
      auto it = libs.find(l);
      return it == libs.end() ? 0.0 : it->second;
    };
    const double p = get("prism"), c = get("clblast"), o = get("openblas");
    fmt::print("{:<28} {:>10.1f} {:>10.1f} {:>10.1f} {:>12.2f} {:>12.2f}\n", name, p, c, o,
               c > 0 ? p / c : 0.0, o > 0 ? p / o : 0.0);
  }
  benchmark::Shutdown();
  return 0;
}
