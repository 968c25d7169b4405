// SPDX-License-Identifier: Apache-2.0
// The tuning stores side by side, same process, same rows: lookup latency from an SQLite file
// and from a PostgreSQL server (answered from the snapshot: it should be the same), and the
// start-up snapshot of a device with 100k rows on the server.
//
// Usage: PRISM_BENCH_PG_URL=postgresql://... prism_bench_tuning_store [--rows N] [Google Benchmark flags]
// benchmarks/tuning/store_bench.sh starts a throw-away server and runs this.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "prism/tuning_db.hpp"

namespace {

using namespace prism::tuning;
using clock_type = std::chrono::steady_clock;

constexpr const char* device = "00000000be7c4000";
std::size_t total_rows = 100000;
// 10 ops x 2 dtypes: groups of total_rows / 20 shapes.
constexpr int ops = 10, dtypes = 2;

std::string pg_url;
std::string sqlite_path;

std::string op_name(int i) {
  return "op" + std::to_string(i);
}

std::string shape_of(std::size_t i) {
  return "m=" + std::to_string(1 + i % 97) + ",n=" + std::to_string(64 * (1 + i / 97)) + ",k=4096";
}

// One `prism db export` document with total_rows rows of one device.
std::string rows_json() {
  std::string out = R"({"format":"prism-tuning","version":1,"devices":[{"fingerprint":")" +
                    std::string(device) + R"(","name":"bench device","driver_version":"1"}],"results":[)";
  std::size_t per_group = total_rows / (ops * dtypes);
  bool first = true;
  for (int o = 0; o < ops; ++o)
    for (int d = 0; d < dtypes; ++d)
      for (std::size_t i = 0; i < per_group; ++i) {
        if (!first) out += ',';
        first = false;
        out += R"({"device":")" + std::string(device) + R"(","op":")" + op_name(o) + R"(","dtype":")" +
               (d ? "f16" : "f32") + R"(","shape":")" + shape_of(i) +
               R"(","backend":"opencl","config":"wg=64","p50_ns":)" + std::to_string(1000 + i) +
               R"(,"driver_version":"1"})";
      }
  return out + "]}";
}

lookup_query query_for(std::size_t i) {
  lookup_query q;
  q.device = device;
  q.op = op_name(3);
  q.dtype = "f32";
  q.shape = shape_key::parse(shape_of(i));
  q.driver_version = "1";
  return q;
}

// A memoized exact hit: what the dispatcher's tier 3 pays per call once it has seen the shape.
void lookup_hit(benchmark::State& state, const std::string& location) {
  database db(location, database::access::read_only);
  auto q = query_for(42);
  if (!db.lookup(q)) {
    state.SkipWithError(("no row in " + db.path() + ": " + db.refusal()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(db.lookup(q));
}

// A shape the process has not asked for yet, in a group it has loaded (5000 rows), which is not
// tuned: the exact scan, then the nearest-shape scan (the most a lookup costs once loaded).
void lookup_new_shape(benchmark::State& state, const std::string& location) {
  database db(location, database::access::read_only);
  if (!db.lookup(query_for(0))) {
    state.SkipWithError(("no row in " + db.path()).c_str());
    return;
  }
  std::size_t i = 0;
  for (auto _ : state) {
    auto q = query_for(0);
    q.shape = shape_key::parse("m=5,n=640,k=" + std::to_string(4097 + i++));  // a new memo key every time
    benchmark::DoNotOptimize(db.lookup(q));
  }
}

// The first lookup of a process: SQLite reads one (op, dtype) group; PostgreSQL takes the
// snapshot of all the device's rows (total_rows) in one query.
void first_lookup(benchmark::State& state, const std::string& location) {
  for (auto _ : state) {
    database db(location, database::access::read_only);
    auto m = db.lookup(query_for(42));
    if (!m) state.SkipWithError("no row");
  }
  state.counters["rows_on_device"] = static_cast<double>(total_rows);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--rows") == 0 && i + 1 < argc) {
      total_rows = std::strtoull(argv[i + 1], nullptr, 10);
      for (int j = i; j + 2 <= argc; ++j) argv[j] = argv[j + 2];
      argc -= 2;
      break;
    }
  const char* url = std::getenv("PRISM_BENCH_PG_URL");
  if (!url || !*url) {
    std::fprintf(
        stderr,
        "prism_bench_tuning_store: set PRISM_BENCH_PG_URL to a server prism may fill (benchmarks/tuning/"
        "store_bench.sh starts one)\n");
    return 2;
  }
  pg_url = url;
  // Lookups must not refresh in the middle of a timing.
  setenv("PRISM_TUNING_DB_REFRESH", "0", 1);
  sqlite_path =
      (std::filesystem::temp_directory_path() / ("prism-bench-store-" + std::to_string(::getpid()) + ".db"))
          .string();
  std::string json = rows_json();
  for (const std::string& location : {sqlite_path, pg_url}) {
    database db(location);
    if (db.is_server()) db.init();
    db.clear(row_filter{device, "", "", ""});
    auto start = clock_type::now();
    auto rep = db.import_json(json);
    double s = std::chrono::duration<double>(clock_type::now() - start).count();
    std::printf("import of %zu rows into %s: %.2f s\n", rep.inserted + rep.replaced + rep.kept,
                db.path().c_str(), s);
  }
  benchmark::RegisterBenchmark("lookup_hit/sqlite", lookup_hit, sqlite_path);
  benchmark::RegisterBenchmark("lookup_hit/postgres", lookup_hit, pg_url);
  benchmark::RegisterBenchmark("lookup_new_shape/sqlite", lookup_new_shape, sqlite_path)->Iterations(2000);
  benchmark::RegisterBenchmark("lookup_new_shape/postgres", lookup_new_shape, pg_url)->Iterations(2000);
  benchmark::RegisterBenchmark("first_lookup/sqlite", first_lookup, sqlite_path)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("first_lookup/postgres_snapshot", first_lookup, pg_url)
      ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::filesystem::remove(sqlite_path);
  return 0;
}
