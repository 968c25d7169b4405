// Weight-only quantized GEMV (linear at M = 1, decode) against the device's read bandwidth:
// each q8_0 / q4_0 / q4_1 (and f32 for scale) GEMV iteration is followed by a paired read
// reference, `sum` over 64 MiB of f32 (a read-only kernel past the 32 MiB LLC), so load changes
// on a shared machine move both. x_read = weight GB/s / read GB/s (issue 17: >= 0.7); cpu_ms
// is the process's CPU time per GEMV (every thread), which compares kernels under load.
// PRISM_DEVICE picks the device; PRISM_BENCH_VENDOR overrides the tune_configs profile;
// PRISM_BENCH_QKEY replaces the GEMV's shape;
// without it each GEMV runs the profile's untuned route for its shape (vendor.yaml's `when`
// entries: the pocl profile's M = 1 config), as a user's call does;
// PRISM_BENCH_QCONFIG replaces the quantized config (e.g. variant=0,qrn=8,qwg=1); several
// configs separated by ';' each get a benchmark, so variants compare in one run (qa=0;qa=1);
// `route` is the profile's route, and `tuned` the config the tuning database (PRISM_TUNING_DB)
// routes the shape to, as a user's call gets it after `prism pretune` (the route, said on
// stderr, where it has no row): `route;tuned` compares them;
// PRISM_BENCH_QACT gives the activations' dtype (f32, the default; f16 or bf16, as a 16-bit
// model's decode runs them); PRISM_BENCH_PIPELINE=N times N calls back to back per wait, for the
// GEMV and the read alike; PRISM_BENCH_DEVICE_TIME=1 times those N calls by the device's clock
// instead (a profiling queue on the same context holds the device with fills while the host
// enqueues them, then the span from the last fill's end to the last call's end), which takes the
// host's enqueue cost out of both: on the H200 host a `linear` call costs more to enqueue than a
// 38 MB q4_0 GEMV takes to run, so wall time there measures the host. PRISM_BENCH_GRAPH=1 times
// them by wall time instead, recorded once as a prism::graph and replayed on the ordinary queue:
// a launch list enqueues a call with one clEnqueueNDRangeKernel, below the GEMV's run time, and
// no queue takes timestamps. On the H200 those cost the driver ~3 us a launch: the q4_0 route
// GEMV [16384, 4096] took 16.5 us a launch pipelined on a plain queue and 19.5 on a profiling one
// (benchmarks/RESULTS.md, "Issue 17, session 48"). It takes precedence over DEVICE_TIME.
// Both stream from memory, not from a cache: the weight and the read's buffer are each copied
// until the copies span three times the device's last-level cache, and the calls take the
// copies in turn, as a model's step takes its layers' weights. A weight or a read smaller than
// that cache would otherwise be timed partly from it: a 16-core Xeon's 300 MiB L3 holds the
// 38 MB q4_0 weight and the 64 MiB read alike. The cache size is the device's
// CL_DEVICE_GLOBAL_MEM_CACHE_SIZE (PoCL: the host's LLC; NVIDIA's driver reports 4 MiB for the
// H200's 50 MB L2, so name it there); PRISM_BENCH_LLC_BYTES replaces it (0: one copy each, the
// protocol before 2026-11-29).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/bench_common.hpp"
#include "dispatch/dispatcher.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/ops.hpp"

namespace {

using namespace prism;
using bench::bench_queue;

// PRISM_BENCH_DEVICE_TIME: the calls are timed by the device's clock (see the top).
bool device_time() {
  static const bool on = !bench::graph_timing() && bench::env_number("PRISM_BENCH_DEVICE_TIME", 0) != 0;
  return on;
}

// Holds bench::profiling_queue's device for about `seconds` while the host enqueues: 64 MiB
// fills (prism-llm's device_step_span does the same for a step).
event hold_device(double seconds) {
  static auto* blocker = new buffer<std::uint32_t>(bench_queue().get_context(), std::size_t{16} << 20);
  static const double fill_seconds = [] {
    queue& q = bench::profiling_queue();
    q.fill(*blocker, 0u).wait();  // first touch
    event e = q.fill(*blocker, 1u);
    e.wait();
    return std::max(1e-6, static_cast<double>(e.profiling().duration_ns()) * 1e-9);
  }();
  const int fills = std::clamp(static_cast<int>(std::ceil(seconds / fill_seconds)), 1, 4000);
  queue& q = bench::profiling_queue();
  event before;
  for (int i = 0; i < fills; ++i) before = q.fill(*blocker, static_cast<std::uint32_t>(i));
  return before;
}

struct timed_call {
  const op_descriptor* d;
  op_call call;
  kernel_config cfg;
  std::vector<op_call> turns;  // the calls taken in turn (the call and its copies; see `rotate`)
  std::size_t next = 0;
  // Enqueues the call on `q`, taking the copies in turn.
  event enqueue_next(queue& q) {
    event e = enqueue_opencl(q, *d, turns.empty() ? call : turns[next], cfg);
    if (!turns.empty()) next = (next + 1) % turns.size();
    return e;
  }
  // Seconds per call: PRISM_BENCH_PIPELINE calls back to back and one wait (default 1: a wait
  // after each call, so the host's round trip counts; a decode step's graph pipelines them).
  double seconds() {
    static const int calls = std::max(1, static_cast<int>(bench::env_number("PRISM_BENCH_PIPELINE", 1)));
    if (bench::graph_timing()) return graph_seconds(calls);
    if (device_time()) return device_seconds(calls);
    queue& q = bench_queue();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) enqueue_next(q);
    enqueue_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
    q.wait();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
  }
  // PRISM_BENCH_DEVICE_TIME: the calls' device span, queued behind hold_device's fills. A run
  // whose last call was queued after the fills ended (the device may have waited for the host)
  // is counted in host_behind, and the hold grows by half and the run repeats (at most 8 times).
  double device_seconds(int calls) {
    queue& q = bench::profiling_queue();
    bench_queue().wait();
    q.wait();
    for (int attempt = 0;; ++attempt) {
      const event before = hold_device(hold_per_call * calls);
      event last;
      for (int i = 0; i < calls; ++i) last = enqueue_next(q);
      last.wait();
      const profiling_info l = last.profiling(), b = before.profiling();
      const double s = l.end_ns > b.end_ns ? static_cast<double>(l.end_ns - b.end_ns) * 1e-9 / calls : 0.0;
      if (l.queued_ns <= b.end_ns || attempt == 8) return s;
      ++host_behind;
      hold_per_call *= 1.5;
    }
  }
  // PRISM_BENCH_GRAPH: `calls` calls (taking the copies in turn) recorded once, then each run
  // replays them and waits.
  double graph_seconds(int calls) {
    queue& q = bench_queue();
    if (!recorded) {
      q.wait();
      recorded = graph::record(q, [&] {
        for (int i = 0; i < calls; ++i) enqueue_next(q);
      });
    }
    q.wait();
    const auto t0 = std::chrono::steady_clock::now();
    recorded->replay(q);
    q.wait();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls;
  }
  std::optional<graph> recorded;  // PRISM_BENCH_GRAPH's calls; `rotate` records them again
  double hold_per_call = 50e-6;   // device_seconds's hold a call, grown while the host falls behind
  int host_behind = 0;            // device_seconds runs whose enqueues outlasted the fills
  double enqueue_seconds = 0;     // wall runs: the host's enqueue time a call, summed over runs
};

// Gives c copies of its input `i` (fresh storage, the same bytes) until they and the original
// span three last-level caches, then takes them in turn.
void rotate(timed_call& c, std::size_t i) {
  queue& q = bench_queue();
  const tensor& x = c.call.inputs[i];
  const std::uint64_t span = 3 * bench::last_level_cache_bytes(), bytes = x.nbytes();
  const std::uint64_t copies = bytes >= span ? 1 : (span + bytes - 1) / bytes;
  c.turns.assign(1, c.call);
  c.recorded.reset();
  if (copies <= 1) return;
  const std::vector<std::byte> host = x.to_host(q);
  for (std::uint64_t k = 1; k < copies; ++k) {
    op_call turn = c.call;
    turn.inputs[i] = tensor::from_host(q, host.data(), x.shape(), x.type());
    c.turns.push_back(std::move(turn));
  }
}

// User + system CPU seconds of this process, every thread (PoCL's workers included).
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

timed_call make(const char* op, const char* key, dtype t, const std::string& config) {
  queue& q = bench_queue();
  const op_descriptor& d = op_registry::instance().get(op);
  sample_options o;
  o.type = t;
  o.seed = 1;
  timed_call c{&d, d.sample(q, shape_key::parse(key), o),
               bench::tune_space_of(d, "PRISM_BENCH_VENDOR").defaults};
  if (const char* act = bench::env("PRISM_BENCH_QACT"); act && is_quantized(t)) {
    const dtype at = parse_dtype(act);
    for (std::size_t i : {std::size_t{0}, std::size_t{2}})
      if (i < c.call.inputs.size() && c.call.inputs[i].defined())
        c.call.inputs[i] = ops::cast(q, c.call.inputs[i], at);
    c.call.outputs.clear();
    allocate_outputs(q, d, c.call);
  }
  const bool tuned = config == "tuned";
  if (!config.empty() && config != "route" && !tuned) {
    c.cfg = d.config.complete(kernel_config::parse(config));
  } else {  // what a user's call gets: the profile's route for this shape (untuned), or with
            // "tuned" what the tuning database (PRISM_TUNING_DB) routes it to, when it is OpenCL
    dispatch::dispatch_options opts;
    opts.skip_tuning_db = !tuned;
    const dispatch::dispatch_result routed = dispatch::plan_call(q, c.call, opts);
    if (routed.backend == "opencl") c.cfg = d.config.complete(kernel_config::parse(routed.config));
    if (tuned && routed.tier != dispatch::source_tier::db_exact &&
        routed.tier != dispatch::source_tier::db_nearest)
      std::fprintf(stderr, "bench_quant: %s %s has no tuning database row (%s); it runs the route\n", key,
                   dtype_name(t), routed.reason.c_str());
  }
  c.seconds();  // build + warm up
  return c;
}

timed_call& read_reference() {
  static auto* r = [] {
    auto* t = new timed_call(make("sum", "outer=4096,r=4096,inner=1", dtype::f32, ""));
    rotate(*t, 0);
    return t;
  }();
  return *r;
}

void bm_gemv(benchmark::State& state, const char* key, dtype t, const std::string& config) {
  std::optional<timed_call> made;
  try {
    made = make("linear", key, t, config);
  } catch (const error& e) {  // a config this shape or device refuses: say why, run the others
    state.SkipWithError(e.what());
    return;
  }
  timed_call& g = *made;
  rotate(g, 1);
  timed_call& ref = read_reference();
  const double weight_bytes = static_cast<double>(g.call.inputs[1].nbytes());
  double seconds = 0, ref_seconds = 0, cpu_seconds = 0;
  g.enqueue_seconds = 0;
  for (auto _ : state) {
    const double cpu0 = process_cpu_seconds();
    const double dt = g.seconds();
    cpu_seconds += process_cpu_seconds() - cpu0;
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
  // CPU time (all threads of the process) per GEMV: what a loaded machine does not inflate.
  state.counters["cpu_ms"] = cpu_seconds / n * 1e3;
  state.counters["copies"] = static_cast<double>(g.turns.size());
  state.counters["read_copies"] = static_cast<double>(ref.turns.size());
  if (device_time())
    state.counters["host_behind"] = static_cast<double>(g.host_behind + ref.host_behind);
  else if (!bench::graph_timing())
    // The host's enqueue a call (wall), which bounds a pipelined call from below.
    state.counters["enqueue_us"] = g.enqueue_seconds / n * 1e6;
  state.SetLabel(g.cfg.str());
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // [16384, 4096] weights: q8_0 71 MB, q4_0 38 MB, q4_1 42 MB, f32 268 MB (all past the LLC).
  // PRISM_BENCH_QKEY replaces the shape (e.g. m=1,n=49152,k=576: a 135M model's tied head).
  const char* key = bench::env("PRISM_BENCH_QKEY") ? bench::env("PRISM_BENCH_QKEY") : "m=1,n=16384,k=4096";
  std::vector<std::string> configs;
  if (const char* v = std::getenv("PRISM_BENCH_QCONFIG")) {
    std::string text = v;
    for (std::size_t at = 0; at <= text.size();) {
      const std::size_t end = std::min(text.find(';', at), text.size());
      if (end > at) configs.push_back(text.substr(at, end - at));
      at = end + 1;
    }
  }
  if (configs.empty()) configs.push_back("");  // the profile's default
  // Seconds per benchmark (PRISM_BENCH_MIN_TIME; default 1): each iteration also runs the read.
  const double min_time = bench::env_number("PRISM_BENCH_MIN_TIME", 1.0);
  for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::q4_1, dtype::f32})
    for (const std::string& config : is_quantized(t) ? configs : std::vector<std::string>{""}) {
      const std::string name = std::string("linear_gemv/") + dtype_name(t) + "/" + key +
                               (config.empty() ? std::string() : "/" + config);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [key, t, config](benchmark::State& s) { bm_gemv(s, key, t, config); })
          ->UseManualTime()
          ->MinTime(min_time);
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
