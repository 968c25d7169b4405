// SPDX-License-Identifier: Apache-2.0
// Attention benchmark: prism's scaled_dot_product_attention (f32, causal, GQA) at Llama-style
// decode and prefill shapes vs an OpenBLAS reference in the same process (per head: sgemm
// scores, row softmax, sgemm with V), GFLOP/s with FLOPs = 2*B*Hq*Lq*Lk*(D+Dv) for both.
// Env: PRISM_DEVICE picks the device; PRISM_ATTN_CONFIG ("variant=1,wg=128") overrides the
// config; PRISM_GEMM_VENDOR (pocl|nvidia|generic) the tune_configs.yaml defaults;
// PRISM_GEMM_NO_BLAS=1 skips the OpenBLAS reference.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "benchmarks/bench_common.hpp"
#include "kernels/op_descriptor.hpp"
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
  std::int64_t b, hq, hkv, lq, lk, d;
};

double flops(const shape& s) {
  // Causal: query i sees Lk - Lq + i + 1 keys.
  double keys = 0;
  for (std::int64_t i = 0; i < s.lq; ++i) keys += static_cast<double>(std::min(s.lk, s.lk - s.lq + i + 1));
  return 2.0 * static_cast<double>(s.b * s.hq) * keys * static_cast<double>(2 * s.d);
}

std::vector<float> values(std::int64_t n, unsigned salt) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + salt) % 17) / 17.0f - 0.5f;
  return v;
}

std::map<std::string, std::map<std::string, double>>& results() {
  static auto* r = new std::map<std::string, std::map<std::string, double>>();
  return *r;
}

void bm_prism(benchmark::State& st, shape s) {
  queue& q = bench_queue();
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  op_call call{
      "scaled_dot_product_attention",
      {tensor::from_floats(q, values(s.b * s.hq * s.lq * s.d, 1), {s.b, s.hq, s.lq, s.d}, dtype::f32),
       tensor::from_floats(q, values(s.b * s.hkv * s.lk * s.d, 2), {s.b, s.hkv, s.lk, s.d}, dtype::f32),
       tensor::from_floats(q, values(s.b * s.hkv * s.lk * s.d, 3), {s.b, s.hkv, s.lk, s.d}, dtype::f32),
       tensor(), tensor()},
      {},
      {}};
  call.set("is_causal", true);
  allocate_outputs(q, d, call);
  const kernel_config cfg = env("PRISM_ATTN_CONFIG")
                                ? d.config.complete(kernel_config::parse(env("PRISM_ATTN_CONFIG")))
                                : tune_space_of(d, "PRISM_GEMM_VENDOR").defaults;
  st.SetLabel(cfg.str());
  enqueue_opencl(q, d, call, cfg).wait();
  for (auto _ : st) enqueue_opencl(q, d, call, cfg).wait();
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops(s) * 1e-9 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

void bm_openblas(benchmark::State& st, shape s) {
  const auto qv = values(s.b * s.hq * s.lq * s.d, 1), kv = values(s.b * s.hkv * s.lk * s.d, 2),
             vv = values(s.b * s.hkv * s.lk * s.d, 3);
  std::vector<float> scores(static_cast<std::size_t>(s.lq * s.lk)), out(static_cast<std::size_t>(s.lq * s.d));
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  const int lq = static_cast<int>(s.lq), lk = static_cast<int>(s.lk), dd = static_cast<int>(s.d);
  auto run = [&] {
    for (std::int64_t b = 0; b < s.b; ++b)
      for (std::int64_t h = 0; h < s.hq; ++h) {
        const std::int64_t hk = h / (s.hq / s.hkv);
        const float* qp = qv.data() + (b * s.hq + h) * s.lq * s.d;
        const float* kp = kv.data() + (b * s.hkv + hk) * s.lk * s.d;
        const float* vp = vv.data() + (b * s.hkv + hk) * s.lk * s.d;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, lq, lk, dd, scale, qp, dd, kp, dd, 0.0f,
                    scores.data(), lk);
        for (int i = 0; i < lq; ++i) {
          float* row = scores.data() + static_cast<std::size_t>(i) * lk;
          const int end = lk - lq + i + 1;
          float mx = -INFINITY;
          for (int j = 0; j < end; ++j) mx = std::max(mx, row[j]);
          float sum = 0;
          for (int j = 0; j < lk; ++j) sum += row[j] = j < end ? std::exp(row[j] - mx) : 0.0f;
          for (int j = 0; j < end; ++j) row[j] /= sum;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, lq, dd, lk, 1.0f, scores.data(), lk, vp, dd,
                    0.0f, out.data(), dd);
      }
  };
  run();
  for (auto _ : st) run();
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops(s) * 1e-9 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      const std::string name = r.benchmark_name();
      const auto slash = name.find('/');
      auto it = r.counters.find("GFLOP/s");
      if (slash == std::string::npos || it == r.counters.end()) continue;
      const auto end = name.find('/', slash + 1);
      results()[name.substr(slash + 1, end == std::string::npos ? std::string::npos : end - slash - 1)]
               [name.substr(0, slash)] = it->second.value;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const bool gpu = bench_queue().get_device().is_gpu();
  // Llama-2-7B attention (32 heads x 128) and a GQA 32/8 variant; prefill 512 on GPUs, 128 on CPUs.
  const std::int64_t pre = gpu ? 512 : 128;
  const std::vector<shape> shapes = {
      {"decode_h32_kv32_lk512", 1, 32, 32, 1, 512, 128},
      {"decode_h32_kv8_lk2048", 1, 32, 8, 1, 2048, 128},
      {fmt::format("prefill_h32_kv32_l{}", pre), 1, 32, 32, pre, pre, 128},
  };
  for (const shape& s : shapes) {
    benchmark::RegisterBenchmark(("prism/" + s.name).c_str(), bm_prism, s)->UseRealTime()->MinTime(0.3);
    if (!env("PRISM_GEMM_NO_BLAS"))
      benchmark::RegisterBenchmark(("openblas/" + s.name).c_str(), bm_openblas, s)
          ->UseRealTime()
          ->MinTime(0.3);
  }
  const device& dev = bench_queue().get_device();
  fmt::print("device: {} ({}), tune vendor: {}\n", dev.name(), dev.platform_name(),
             vendor_of(dev, "PRISM_GEMM_VENDOR"));
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  fmt::print("\n{:<28} {:>10} {:>10} {:>12}\n", "shape", "prism", "openblas", "x openblas");
  for (auto& [name, libs] : results()) {
    const double p = libs.count("prism") ? libs["prism"] : 0.0,
                 o = libs.count("openblas") ? libs["openblas"] : 0.0;
    fmt::print("{:<28} {:>10.2f} {:>10.2f} {:>12.2f}\n", name, p, o, o > 0 ? p / o : 0.0);
  }
  benchmark::Shutdown();
  return 0;
}
