// SPDX-License-Identifier: Apache-2.0
// Memory-bound op benchmarks: each op's GB/s (descriptor byte count / time) and its ratio to the
// device's own clEnqueueCopyBuffer bandwidth, timed right after every op iteration (paired, so
// load changes on a shared machine move both).
// Time is the device's: the command's profiling start-to-end on a profiling queue, as PyTorch
// times its kernels with CUDA events (benchmarks/gpu/torch_reference.py); every case here is one
// command. The host wall time of the enqueue-and-wait is the second column (`wall_us`,
// `wall_GB/s`).
// PRISM_BENCH_MIN_TIME sets the seconds a benchmark runs (default 0.5 for the copy, 0.3 a case).
// PRISM_BENCH_GRAPH=1 times each case as a model's step runs it instead: PRISM_BENCH_PIPELINE
// calls (default 20) recorded once as a prism::graph and replayed on a plain queue, wall time a
// call (no queue takes timestamps: NVIDIA's driver spends ~3 us a launch on them, RESULTS.md
// "Issue 17, session 48"); the calls take fresh samples of the case in turn until those span
// three last-level caches (PRISM_BENCH_LLC_BYTES, else the device's), so each streams from
// memory, and the copy reference is replayed the same way.
// PRISM_DEVICE picks the device; PRISM_BENCH_VENDOR overrides the tune_configs profile;
// PRISM_BENCH_CONFIG overrides params of the defaults (see bm_op), or `route` runs the profile's
// untuned route for the case's shape (vendor.yaml, `when` entries included) as a user's call
// gets it; PRISM_BENCH_CASES adds cases
// (`op/dtype/shape key`, separated by `;`: e.g. decode attention at a shorter visible length,
// `decode_attention/bf16/heads=32,kv_heads=8,d=128,max_seq=192`).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/bench_common.hpp"
#include "kernels/op_descriptor.hpp"

namespace {

using namespace prism;
using bench::bench_queue;

constexpr std::size_t kCopyBytes = std::size_t{64} << 20;

/// One command's device and wall seconds.
struct timed {
  double device = 0, wall = 0;
};

/// Runs `enqueue` (which returns its command's event) to completion.
template <class Enqueue>
timed time_command(queue& q, Enqueue&& enqueue) {
  const auto t0 = std::chrono::steady_clock::now();
  const event e = enqueue();
  q.wait_and_throw();
  timed t;
  t.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t.device = e ? static_cast<double>(e.profiling().duration_ns()) * 1e-9 : t.wall;
  return t;
}

/// PRISM_BENCH_GRAPH's calls a replay.
int graph_calls() {
  static const int n = std::max(1, static_cast<int>(bench::env_number("PRISM_BENCH_PIPELINE", 20)));
  return n;
}

/// Wall seconds a call of one replay of `g` on the plain queue.
double replay_seconds(graph& g) {
  queue& q = bench_queue();
  q.wait();
  const auto t0 = std::chrono::steady_clock::now();
  g.replay(q);
  q.wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / graph_calls();
}

/// The reference buffers (64 MiB each), made once: never freed (no OpenCL call at exit).
std::pair<buffer<std::byte>, buffer<std::byte>>& copy_buffers() {
  queue& q = bench::profiling_queue();
  static auto* b = new std::pair<buffer<std::byte>, buffer<std::byte>>(
      buffer<std::byte>(q.get_context(), kCopyBytes), buffer<std::byte>(q.get_context(), kCopyBytes));
  return *b;
}

/// One timed clEnqueueCopyBuffer of 64 MiB.
timed timed_copy() {
  queue& q = bench::profiling_queue();
  auto& [a, b] = copy_buffers();
  return time_command(q, [&] { return q.copy(a, b); });
}

/// PRISM_BENCH_GRAPH's copy reference: graph_calls() copies of 64 MiB, recorded once.
graph& copy_graph() {
  static auto* g = [] {
    auto& [a, b] = copy_buffers();
    queue& q = bench_queue();
    auto* r = new graph(graph::record(q, [&] {
      for (int i = 0; i < graph_calls(); ++i) q.copy(a, b);
    }));
    replay_seconds(*r);  // warm up
    return r;
  }();
  return *g;
}

/// One copy's seconds: device time, or (PRISM_BENCH_GRAPH) wall time a copy of a replay.
double copy_seconds() {
  return bench::graph_timing() ? replay_seconds(copy_graph()) : timed_copy().device;
}

/// Reference: clEnqueueCopyBuffer of 64 MiB (counted as read + write bytes).
void bm_copy_reference(benchmark::State& state) {
  if (bench::graph_timing()) {
    copy_seconds();
    double seconds = 0;
    for (auto _ : state) {
      const double t = copy_seconds();
      state.SetIterationTime(t);
      seconds += t;
    }
    const double bytes = 2.0 * static_cast<double>(kCopyBytes) * static_cast<double>(state.iterations());
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
    state.counters["GB/s"] = bytes / seconds / 1e9;
    return;
  }
  timed_copy();
  double seconds = 0, wall = 0;
  for (auto _ : state) {
    const timed t = timed_copy();
    state.SetIterationTime(t.device);
    seconds += t.device;
    wall += t.wall;
  }
  const double n = static_cast<double>(state.iterations());
  double bytes = 2.0 * static_cast<double>(kCopyBytes) * n;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["GB/s"] = bytes / seconds / 1e9;
  state.counters["wall_GB/s"] = bytes / wall / 1e9;
  state.counters["wall_us"] = wall / n * 1e6;
}

void bm_op(benchmark::State& state, const std::string& name, const std::string& key, dtype t) {
  queue& q = bench::profiling_queue();
  const op_descriptor& d = op_registry::instance().get(name);
  sample_options o;
  o.type = t;
  o.seed = 1;
  op_call c = d.sample(q, shape_key::parse(key), o);
  kernel_config cfg = bench::tune_space_of(d, "PRISM_BENCH_VENDOR").defaults;
  const char* config_env = bench::env("PRISM_BENCH_CONFIG");
  // PRISM_BENCH_CONFIG=wg=256,ept=2 overrides those params for every case whose op has them
  // all (the others keep their defaults), to compare a candidate default across ops; `route`
  // takes the profile's route for the shape, as a user's untuned call does.
  if (config_env && std::string(config_env) == "route") {
    dispatch::dispatch_options opts;
    opts.skip_tuning_db = true;
    const dispatch::dispatch_result routed = dispatch::plan_call(q, c, opts);
    if (routed.backend != "opencl") {
      state.SkipWithError(("the route is backend " + routed.backend + ", not opencl").c_str());
      return;
    }
    cfg = d.config.complete(kernel_config::parse(routed.config));
  } else if (config_env) {
    const kernel_config over = kernel_config::parse(config_env);
    bool all = true;
    for (const auto& [n, v] : over.items()) all = all && d.config.has(n);
    if (all) {
      for (const auto& [n, v] : over.items()) cfg.set(n, v);
      if (auto why = d.config.validate(cfg)) {
        state.SkipWithError(("PRISM_BENCH_CONFIG: " + *why).c_str());
        return;
      }
    }
  }
  try {
    enqueue_opencl(q, d, c, cfg);  // build + warm up
    q.wait_and_throw();
  } catch (const prism::error& e) {
    // A config no implementation takes for this case (e.g. a tensor-core attention variant on
    // an f32 case): skip it, not the whole run.
    state.SkipWithError(e.what());
    return;
  }
  // PRISM_BENCH_GRAPH: samples with other seeds until they span three last-level caches, and
  // graph_calls() calls taking them in turn, recorded on the plain queue.
  std::optional<graph> replayed;
  std::vector<op_call> turns{c};  // the graph's samples: they outlive its replays
  if (bench::graph_timing()) {
    const double span = 3.0 * static_cast<double>(bench::last_level_cache_bytes());
    while (static_cast<double>(turns.size()) * d.bytes(c) < span && turns.size() < 64) {
      o.seed = turns.size() + 1;
      turns.push_back(d.sample(q, shape_key::parse(key), o));
    }
    queue& plain = bench_queue();
    q.wait_and_throw();
    replayed = graph::record(plain, [&] {
      for (int i = 0; i < graph_calls(); ++i) enqueue_opencl(plain, d, turns[i % turns.size()], cfg);
    });
    replay_seconds(*replayed);  // warm up
    state.counters["samples"] = static_cast<double>(turns.size());
  }
  copy_seconds();
  double seconds = 0, wall = 0, copy_total = 0;
  for (auto _ : state) {
    if (replayed) {
      const double t = replay_seconds(*replayed);
      state.SetIterationTime(t);
      seconds += t;
    } else {
      const timed t = time_command(q, [&] { return enqueue_opencl(q, d, c, cfg); });
      state.SetIterationTime(t.device);
      seconds += t.device;
      wall += t.wall;
    }
    copy_total += copy_seconds();  // the paired reference (not in the op's manual time)
  }
  const double n = static_cast<double>(state.iterations());
  double bytes = d.bytes(c) * n;
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  double gbs = bytes / seconds / 1e9;
  const double copy_gbs = 2.0 * static_cast<double>(kCopyBytes) * n / copy_total / 1e9;
  state.counters["GB/s"] = gbs;
  state.counters["copy_GB/s"] = copy_gbs;
  state.counters["x_copy"] = gbs / copy_gbs;
  state.counters["us"] = seconds / n * 1e6;
  if (!replayed) {
    state.counters["wall_GB/s"] = bytes / wall / 1e9;
    state.counters["wall_us"] = wall / n * 1e6;
  }
  // decode_attention's byte count is its whole cache's; the sample reads 2 * max_seq / 3 + 1
  // keys of it (its cache is two thirds full): the K/V bytes read, against which issue 13
  // states its bandwidth target.
  if (name == "decode_attention") {
    const tensor& cache = c.inputs[3];
    const double kv_bytes = static_cast<double>(cache.nbytes()) *
                            static_cast<double>(2 * cache.size(2) / 3 + 1) /
                            static_cast<double>(cache.size(2));
    state.counters["kv_GB/s"] = kv_bytes * n / seconds / 1e9;
  }
  if (d.flops) state.counters["TFLOP/s"] = d.flops(c) * n / seconds / 1e12;  // as the descriptor counts them
  state.SetLabel(cfg.str());
}

struct bench_case {
  const char* op;
  const char* key;
  dtype type;
};

// 64 MiB of f32 per main operand: past the last-level cache (32 MiB here), like the copy reference.
const bench_case cases[] = {
    {"copy", "n=16777216", dtype::f32},
    {"neg", "n=16777216", dtype::f32},
    {"exp", "n=16777216", dtype::f32},
    {"gelu", "n=16777216", dtype::f32},
    {"silu", "n=16777216", dtype::f32},
    {"exp", "n=16777216", dtype::f16},
    {"exp", "n=16777216", dtype::bf16},
    {"add", "n=16777216", dtype::f32},
    {"mul", "n=16777216", dtype::f16},
    {"silu_and_mul", "rows=4096,d=4096", dtype::f32},
    {"cast", "n=16777216", dtype::f32},
    {"cast", "n=16777216", dtype::f16},
    {"sum", "outer=4096,r=4096,inner=1", dtype::f32},
    {"softmax", "rows=4096,r=4096,inner=1", dtype::f32},
    {"softmax", "rows=4096,r=4096,inner=1", dtype::f16},
    {"rms_norm", "rows=4096,d=4096", dtype::f32},
    {"layer_norm", "rows=4096,d=4096", dtype::f32},
    {"fused_add_rms_norm", "rows=4096,d=4096", dtype::f32},
    {"rotary_embedding", "tokens=2048,heads=64,d=128,rot=128", dtype::i64},
    {"embedding", "n=1024,v=32000,d=4096", dtype::f32},
    {"embedding", "n=1024,v=32000,d=4096", dtype::bf16},
    // Decode attention over a KV cache (the sample fills two thirds of max_seq: 4097 keys of
    // 6145, 2731 of 4096). Its byte count is the whole cache's: GB/s here understates the keys read.
    {"decode_attention", "heads=32,kv_heads=8,d=128,max_seq=6145", dtype::f32},
    {"decode_attention", "heads=32,kv_heads=8,d=128,max_seq=6145", dtype::bf16},
    {"decode_attention", "heads=16,kv_heads=8,d=128,max_seq=4096", dtype::f32},
    {"decode_attention", "heads=16,kv_heads=8,d=128,max_seq=4096", dtype::bf16},
    // Causal prefill attention at sequence 2048, d = 128: Llama-2-7B's 32 heads and a GQA 32/8
    // layout (benchmarks/gpu/torch_attention_prefill.py times PyTorch's SDPA on the same shapes).
    {"scaled_dot_product_attention", "b=1,hq=32,hkv=32,lq=2048,lk=2048,d=128,causal=1,mask=0", dtype::f32},
    {"scaled_dot_product_attention", "b=1,hq=32,hkv=32,lq=2048,lk=2048,d=128,causal=1,mask=0", dtype::bf16},
    {"scaled_dot_product_attention", "b=1,hq=32,hkv=8,lq=2048,lk=2048,d=128,causal=1,mask=0", dtype::f32},
    {"scaled_dot_product_attention", "b=1,hq=32,hkv=8,lq=2048,lk=2048,d=128,causal=1,mask=0", dtype::bf16},
};

/// A case to register: op, dtype and shape key, owned.
struct named_case {
  std::string op, key;
  dtype type;
};

/// PRISM_BENCH_CASES: `op/dtype/key` entries separated by ';', checked here (op registered, dtype
/// one of the op's, key parsable), so that a typo fails before any case runs.
std::vector<named_case> env_cases() {
  std::vector<named_case> out;
  const char* env = std::getenv("PRISM_BENCH_CASES");
  if (!env) return out;
  const std::string text = env;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t end = std::min(text.find(';', at), text.size());
    const std::string entry = text.substr(at, end - at);
    at = end + 1;
    if (entry.empty()) continue;
    const std::size_t s1 = entry.find('/'), s2 = s1 == std::string::npos ? s1 : entry.find('/', s1 + 1);
    if (s2 == std::string::npos)
      throw error(errc::invalid_argument, "PRISM_BENCH_CASES",
                  "'" + entry + "' is not op/dtype/shape key (e.g. add/f32/n=1048576)");
    named_case c{entry.substr(0, s1), entry.substr(s2 + 1), dtype::f32};
    const op_descriptor* d = nullptr;
    try {  // the op, dtype and key's own errors, named with the entry
      c.type = parse_dtype(entry.substr(s1 + 1, s2 - s1 - 1));
      d = &op_registry::instance().get(c.op);
      (void)shape_key::parse(c.key);
    } catch (const error& e) {
      throw error(errc::invalid_argument, "PRISM_BENCH_CASES", "'" + entry + "': " + e.what());
    }
    bool listed = false;
    std::string valid;
    for (dtype t : d->dtypes) {
      listed = listed || t == c.type;
      valid += std::string(valid.empty() ? "" : ", ") + dtype_name(t);
    }
    if (!listed)
      throw error(errc::invalid_argument, "PRISM_BENCH_CASES",
                  "'" + entry + "': " + c.op + " takes dtypes " + valid + ", not " + dtype_name(c.type));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  std::vector<named_case> all;
  for (const auto& c : cases) all.push_back({c.op, c.key, c.type});
  try {
    for (auto& c : env_cases()) all.push_back(std::move(c));
  } catch (const prism::error& e) {
    std::fprintf(stderr, "prism_bench_ops: %s\n", e.what());
    return 2;
  }
  // Seconds per benchmark (PRISM_BENCH_MIN_TIME; default 0.5 for the copy, 0.3 for a case).
  const double min_time = bench::env_number("PRISM_BENCH_MIN_TIME", 0);
  benchmark::RegisterBenchmark("copy_reference/64MiB", bm_copy_reference)
      ->UseManualTime()
      ->MinTime(min_time > 0 ? min_time : 0.5);
  for (const auto& c : all) {
    std::string name = c.op + "/" + dtype_name(c.type) + "/" + c.key;
    benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& s) { bm_op(s, c.op, c.key, c.type); })
        ->UseManualTime()
        ->MinTime(min_time > 0 ? min_time : 0.3);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
