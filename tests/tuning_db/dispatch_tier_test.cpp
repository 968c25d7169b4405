// SPDX-License-Identifier: Apache-2.0
// The dispatcher's tier 3 on the tuning database: an exact row routes its shape (db-exact), a
// nearby shape takes the nearest row (db-nearest), rows with a stale kernel hash or of another
// device are never used, and pretune fills rows that dispatch then finds.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <thread>

#include "dispatch/dispatcher.hpp"
#include "dispatch/tuner/pretune.hpp"
#include "dispatch/tuning_tier.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/runtime.hpp"
#include "tests/tuning_db/spawn.hpp"

using namespace prism;
using namespace prism::tuning;

namespace {

// One database for the whole test program: the dispatcher's lookup uses the process default.
database& test_db() {
  static database* db = [] {
    std::string path = test::make_temp_dir("dispatch") + "/tuning.db";
    database::set_default_path(path);
    return &database::process_default();
  }();
  return *db;
}

// The prism binary the kill -9 test runs: $PRISM_CLI (the bundle's, where the tests run on
// another machine: benchmarks/gpu), else the build tree's.
std::string cli_binary() {
  const char* v = std::getenv("PRISM_CLI");
  return v && *v ? v : PRISM_CLI;
}

// One opencl candidate a shape, one or two short timed runs, shapes re-tuned: pretune's whole
// path, quickly.
dispatch::tuner::pretune_options quick_pretune(shape_set shapes) {
  dispatch::tuner::pretune_options o;
  o.shapes = std::move(shapes);
  o.backends = {"opencl"};
  o.max_per_backend = 1;
  o.min_runs = 1;
  o.max_runs = 2;
  o.target_s_per_candidate = 0.01;
  o.force = true;
  return o;
}

op_call sample(queue& q, const std::string& op, const std::string& key) {
  const auto& d = op_registry::instance().get(op);
  sample_options o;
  o.type = dtype::f32;
  o.seed = 7;
  return d.sample(q, prism::shape_key::parse(key), o);
}

result_row row_for(const device& dev, const std::string& op, const std::string& shape,
                   const std::string& backend, const std::string& config) {
  result_row r;
  r.device = dev.fingerprint().hash;
  r.op = op;
  r.dtype = "f32";
  r.shape = shape;
  r.backend = backend;
  r.config = config;
  r.p20_ns = r.p50_ns = r.p80_ns = 1000;
  r.default_ns = 2000;
  r.kernel_hash = dispatch::route_hash(dev, op_registry::instance().get(op), backend, config);
  r.driver_version = dev.driver_version();
  return r;
}

}  // namespace

TEST(TuningDispatch, ExactAndNearestRowsRouteDispatch) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  db.put_result(row_for(dev, "rms_norm", "rows=16,d=256", "host", ""));
  dispatch::use_tuning_database();  // clears the dispatcher's memo

  auto exact = sample(q, "rms_norm", "rows=16,d=256");
  auto r = dispatch::dispatch_call(q, exact);
  q.wait();
  EXPECT_EQ(r.tier, dispatch::source_tier::db_exact) << r.reason;
  EXPECT_EQ(r.backend, "host");

  auto near = sample(q, "rms_norm", "rows=32,d=256");
  r = dispatch::dispatch_call(q, near);
  q.wait();
  EXPECT_EQ(r.tier, dispatch::source_tier::db_nearest) << r.reason;
  EXPECT_EQ(r.backend, "host");
  EXPECT_NE(r.reason.find("(row rows=16,d=256)"), std::string::npos) << r.reason;  // the row it borrowed

  // Far away (distance > 8): vendor default, not the database.
  auto far = sample(q, "rms_norm", "rows=16,d=131072");
  r = dispatch::dispatch_call(q, far);
  q.wait();
  EXPECT_NE(r.tier, dispatch::source_tier::db_exact);
  EXPECT_NE(r.tier, dispatch::source_tier::db_nearest);
}

// A GEMM row tuned at prefill size never serves a decode-size call (other kernels below m = 16),
// though it is within the nearest-shape distance; a row on the same side does.
TEST(TuningDispatch, GemmRowsServeOnlyTheirSideOfSmallM) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  db.put_result(row_for(dev, "linear", "m=128,n=64,k=64", "host", ""));
  dispatch::use_tuning_database();
  auto decode = sample(q, "linear", "m=1,n=64,k=64");
  auto r = dispatch::dispatch_call(q, decode);
  q.wait();
  EXPECT_NE(r.tier, dispatch::source_tier::db_nearest) << r.reason;
  auto prefill = sample(q, "linear", "m=64,n=64,k=64");
  r = dispatch::dispatch_call(q, prefill);
  q.wait();
  EXPECT_EQ(r.tier, dispatch::source_tier::db_nearest) << r.reason;
  EXPECT_EQ(r.backend, "host");
}

TEST(TuningDispatch, StaleAndForeignRowsAreNotUsed) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  auto stale = row_for(dev, "softmax", "rows=8,r=512,inner=1", "host", "");
  stale.kernel_hash = "0000000000000000";  // built from other kernel sources
  db.put_result(stale);
  auto foreign = row_for(dev, "softmax", "rows=8,r=1024,inner=1", "host", "");
  foreign.device = "ffffffffffffffff";
  db.put_result(foreign);
  dispatch::use_tuning_database();

  for (const char* key : {"rows=8,r=512,inner=1", "rows=8,r=1024,inner=1"}) {
    auto call = sample(q, "softmax", key);
    auto r = dispatch::dispatch_call(q, call);
    q.wait();
    EXPECT_NE(r.tier, dispatch::source_tier::db_exact) << key;
    EXPECT_NE(r.tier, dispatch::source_tier::db_nearest) << key;
  }
  db.set_validator(dispatch::stale_row_validator({dev}));  // what `prism db check` installs
  auto stale_rows = db.check({describe(dev)});
  bool listed = false;
  for (auto& s : stale_rows)
    listed = listed || (s.row.shape == stale.shape && s.reason.find("kernel hash") != std::string::npos);
  EXPECT_TRUE(listed);
}

TEST(TuningDispatch, PretuneFillsRowsDispatchFinds) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  dispatch::tuner::pretune_options o;
  o.shapes = parse_shape_set("shapes:\n  - {op: rms_norm, rows: [4, 8], d: 512}\n", "test");
  o.backends = {"opencl", "host"};
  o.max_per_backend = 2;
  o.min_runs = 2;
  o.max_runs = 3;
  o.target_s_per_candidate = 0.01;
  auto report = dispatch::tuner::pretune(dev, db, o);
  ASSERT_EQ(report.shapes.size(), 2u);
  for (auto& s : report.shapes) {
    EXPECT_EQ(s.status, dispatch::tuner::shape_outcome::state::tuned) << s.detail;
    EXPECT_GT(s.row.p50_ns, 0);
    EXPECT_GT(s.row.default_ns, 0);
    EXPECT_FALSE(
        db.candidates(dev.fingerprint().hash, "rms_norm", "f32", tuning::shape_key::parse(s.shape)).empty());
  }
  auto summary = dispatch::tuner::summary_table(report);
  EXPECT_NE(summary.find("rms_norm f32 [rows=4,d=512]"), std::string::npos) << summary;

  // A second run finds both shapes done.
  auto again = dispatch::tuner::pretune(dev, db, o);
  for (auto& s : again.shapes) EXPECT_EQ(s.status, dispatch::tuner::shape_outcome::state::already_tuned);

  // Dispatch of a pretuned shape comes from the database.
  auto call = sample(q, "rms_norm", "rows=8,d=512");
  auto r = dispatch::dispatch_call(q, call);
  q.wait();
  EXPECT_EQ(r.tier, dispatch::source_tier::db_exact) << r.reason;
}

TEST(TuningDispatch, DtypeKeyCollapsesUniformInputs) {
  EXPECT_EQ(dispatch::dtype_key("f32|f32|-"), "f32");
  EXPECT_EQ(dispatch::dtype_key("f16"), "f16");
  EXPECT_EQ(dispatch::dtype_key("i64|f32|-|f32"), "i64|f32|f32");
  EXPECT_EQ(dispatch::dtype_key("-"), "-");
}

// Runs only inside the child spawned below (PRISM_RECORD_UNTUNED is read once per process).
TEST(TuningDispatch, RecordUntunedChild) {
  if (!std::getenv("PRISM_TUNING_RECORD_CHILD")) GTEST_SKIP() << "runs as a child of RecordsMissesForPretune";
  queue q;
  dispatch::use_tuning_database();
  for (const char* key : {"rows=3,d=64", "rows=5,d=64", "rows=3,d=64"}) {
    auto call = sample(q, "rms_norm", key);
    dispatch::dispatch_call(q, call);
  }
  // Mixed dtypes: f32 weights + i64 indices, f32 in -> i64 out, and no inputs at all.
  for (auto [op, key] : {std::pair{"embedding", "n=3,v=10,d=8"}, std::pair{"argmax", "outer=2,r=8,inner=1"},
                         std::pair{"zeros", "n=5"}}) {
    auto call = sample(q, op, key);
    dispatch::dispatch_call(q, call);
  }
  q.wait();
}

TEST(TuningDispatch, RecordsMissesForPretune) {
  std::string dir = test::make_temp_dir("record-dispatch");
  std::string file = dir + "/untuned.yaml";
  std::vector<std::string> args{"--gtest_filter=TuningDispatch.RecordUntunedChild"};
  auto c = test::spawn_helper(args, dir + "/child.out",
                              {{"PRISM_TUNING_RECORD_CHILD", "1"},
                               {"PRISM_RECORD_UNTUNED", file},
                               {"PRISM_TUNING_DB", dir + "/empty.db"}},
                              false, "/proc/self/exe");
  ASSERT_EQ(test::wait_child(c), 0) << test::read_file(dir + "/child.out");
  auto set = load_shape_set(file);  // the file pretune --shapes reads
  std::set<std::string> got;
  queue q;
  for (auto& e : set.entries) {
    got.insert(e.op + " " + e.dtype);
    // What pretune does with the entry: sample the op with its dtype; the sampled call must have
    // the key that missed (so the tuned row is the one dispatch looks up).
    const auto& d = op_registry::instance().get(e.op);
    sample_options o;
    o.type = parse_dtype(e.dtype);
    auto call = d.sample(q, prism::shape_key::parse(e.shape.str()), o);
    EXPECT_EQ(d.key(call).str(), prism::shape_key::parse(e.shape.str()).str()) << e.op;
  }
  EXPECT_EQ(set.entries.size(), 5u) << test::read_file(file);
  // Each dispatch of a recorded shape is counted (rows=3 twice), and written at exit.
  for (auto& e : set.entries)
    EXPECT_EQ(e.calls, e.op == "rms_norm" && e.shape.str() == "rows=3,d=64" ? 2u : 1u)
        << e.op << " " << e.shape.str() << "\n"
        << test::read_file(file);
  EXPECT_EQ(got, (std::set<std::string>{"rms_norm f32", "embedding f32", "argmax f32", "zeros f32"}))
      << test::read_file(file);
}

// host is blocking: timed alone it can win a small elementwise op that stalls a model's queue on
// every call, so default pretune options offer it only on CPU devices for calls whose default
// takes >= 1 ms; it is a candidate whenever asked for.
TEST(TuningDispatch, HostIsACandidateWhenRequestedOrLongOnACpu) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  const auto& desc = op_registry::instance().get("silu_and_mul");
  const auto vendor = dispatch::device_vendor(dev);
  auto has_host = [](const std::vector<dispatch::candidate>& cs) {
    for (auto& c : cs)
      if (c.backend == "host") return true;
    return false;
  };
  dispatch::candidate_options co;
  co.max_per_backend = 1;
  EXPECT_FALSE(has_host(dispatch::tuner::make_candidates(dev, desc, dtype::f32, vendor, co)));
  co.default_ns = 0.5 * dispatch::host_min_default_ns;
  EXPECT_FALSE(has_host(dispatch::tuner::make_candidates(dev, desc, dtype::f32, vendor, co)));
  co.default_ns = dispatch::host_min_default_ns;
  EXPECT_EQ(has_host(dispatch::tuner::make_candidates(dev, desc, dtype::f32, vendor, co)), dev.is_cpu());
  co.backends = {"opencl"};
  EXPECT_FALSE(has_host(dispatch::tuner::make_candidates(dev, desc, dtype::f32, vendor, co)));
  co.default_ns = 0;
  co.backends = {"opencl", "host"};
  EXPECT_TRUE(has_host(dispatch::tuner::make_candidates(dev, desc, dtype::f32, vendor, co)));

  const std::string fp = dev.fingerprint().hash;
  dispatch::tuner::pretune_options o;
  o.shapes = parse_shape_set("shapes:\n  - {op: silu_and_mul, rows: 32, d: 64}\n", "test");
  o.max_per_backend = 1;
  o.min_runs = 1;
  o.max_runs = 2;
  o.target_s_per_candidate = 0.001;
  auto report = dispatch::tuner::pretune(dev, db, o);  // default options; the call takes microseconds
  ASSERT_EQ(report.shapes.size(), 1u);
  ASSERT_EQ(report.shapes[0].status, dispatch::tuner::shape_outcome::state::tuned) << report.shapes[0].detail;
  const auto key = tuning::shape_key::parse(report.shapes[0].shape);
  // The policy reads the measured default: on a loaded machine even this call can take 1 ms.
  // (The row's default_ns is timed again later, so it is not what the policy saw.)
  if (report.shapes[0].candidates_default_ns < dispatch::host_min_default_ns) {
    EXPECT_NE(report.shapes[0].row.backend, "host");
    for (auto& c : db.candidates(fp, "silu_and_mul", "f32", key)) EXPECT_NE(c.backend, "host");
  }

  o.backends = {"host"};
  o.force = true;
  auto asked = dispatch::tuner::pretune(dev, db, o);
  ASSERT_EQ(asked.shapes.size(), 1u);
  bool measured = false;
  for (auto& c : db.candidates(fp, "silu_and_mul", "f32", key)) measured = measured || c.backend == "host";
  EXPECT_TRUE(measured);
}

TEST(TuningDispatch, BudgetStopsCleanlyAndTheNextRunResumes) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  dispatch::tuner::pretune_options o;
  o.shapes = parse_shape_set("shapes:\n  - {op: softmax, rows: [2, 3], r: 128, inner: 1}\n", "test");
  o.backends = {"opencl"};
  o.max_per_backend = 1;
  o.min_runs = 1;
  o.max_runs = 2;
  o.target_s_per_candidate = 0.001;
  o.budget_s = 1e-9;  // spent before the first shape starts
  auto cut = dispatch::tuner::pretune(dev, db, o);
  EXPECT_TRUE(cut.budget_exhausted);
  for (auto& s : cut.shapes) EXPECT_EQ(s.status, dispatch::tuner::shape_outcome::state::not_reached);
  EXPECT_NE(dispatch::tuner::summary_table(cut).find("run the same command again"), std::string::npos);
  EXPECT_TRUE(db.results(row_filter{"", "softmax", "", "rows=2,r=128,inner=1"}).empty());
  o.budget_s = 0;
  auto resumed = dispatch::tuner::pretune(dev, db, o);
  EXPECT_FALSE(resumed.budget_exhausted);
  for (auto& s : resumed.shapes)
    EXPECT_EQ(s.status, dispatch::tuner::shape_outcome::state::tuned) << s.detail;
}

namespace prism {
namespace {
// Pretune's final choice works on interleaved series: medians decide, not a single fast run, and
// the winner must beat the default by the margin.
TEST(TuningDispatch, FinalChoiceUsesMediansAndTheMargin) {
  using dispatch::tuner::pick_final;
  const std::vector<double> def{100, 101, 99, 100, 102};
  // Finalist 0 had one lucky run (min 50) but a median of 95; finalist 1 a steady 90.
  const std::vector<std::vector<double>> fin{{50, 95, 96, 95, 97}, {90, 91, 89, 90, 92}};
  EXPECT_EQ(pick_final(def, fin), std::optional<std::size_t>(1));
  // 0.95x of the default passes a 0.97 margin; 0.99x does not: the default route is kept.
  EXPECT_EQ(pick_final(def, {{95, 95, 95}}), std::optional<std::size_t>(0));
  EXPECT_EQ(pick_final(def, {{99, 99, 99}}), std::nullopt);
  EXPECT_EQ(pick_final(def, {{99, 99, 99}}, 1.0), std::optional<std::size_t>(0));
  // The default failed (no series): the best finalist wins outright; no finalists: nothing.
  EXPECT_EQ(pick_final({}, fin), std::optional<std::size_t>(1));
  EXPECT_EQ(pick_final(def, {}), std::nullopt);
}
}  // namespace
}  // namespace prism

// kill -9 of `prism pretune` itself, mid-run: the file passes PRAGMA integrity_check, every shape
// pretune reported as finished has its row, and the same command then resumes (finished shapes
// are skipped) and completes the set.
TEST(TuningDispatch, KillDashNineDuringPretuneKeepsFinishedShapes) {
  using namespace prism::tuning::test;
  auto dir = make_temp_dir("pretune-kill9");
  const std::string db_path = dir + "/tuning.db", shapes = dir + "/shapes.yaml";
  {
    // Enough small shapes that the run is still going after the first commits.
    std::string text = "shapes:\n";
    for (int i = 1; i <= 40; ++i) text += "  - {op: add, n: " + std::to_string(1000 + 37 * i) + "}\n";
    std::FILE* f = std::fopen(shapes.c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  const std::vector<std::string> args = {"pretune", "--shapes",   shapes,   "--db",
                                         db_path,   "--backends", "opencl", "--max-candidates",
                                         "1",       "--progress", "lines"};
  auto c = spawn_helper(args, dir + "/pretune.out", {}, false, cli_binary());
  // Kill it once at least 3 shapes are reported finished.
  auto finished = [&](const std::string& out) {
    std::vector<std::string> keys;
    std::regex line(R"(pretune: \[\d+/\d+\] add f32 \[(n=\d+)\] -> )");
    for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
      keys.push_back((*it)[1]);
    return keys;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && finished(read_file(c.output_path)).size() < 3)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(c.pid, SIGKILL);
  ASSERT_EQ(wait_child(c), 128 + SIGKILL) << read_file(c.output_path);
  const auto done = finished(read_file(c.output_path));
  ASSERT_GE(done.size(), 3u) << read_file(c.output_path);
  ASSERT_LT(done.size(), 40u) << "pretune finished before the kill; the test needs more shapes";

  const std::string fp = queue().get_device().fingerprint().hash;
  {
    database db(db_path);
    EXPECT_TRUE(db.refusal().empty()) << db.refusal();
    EXPECT_EQ(db.integrity_check(), "ok");
    for (const auto& k : done)
      EXPECT_TRUE(db.find_result(fp, "add", "f32", tuning::shape_key::parse(k))) << k << " lost";
  }
  // The same command resumes: the finished shapes are skipped, the rest are tuned.
  auto again = spawn_helper(args, dir + "/pretune2.out", {}, false, cli_binary());
  ASSERT_EQ(wait_child(again), 0) << read_file(again.output_path);
  const auto out2 = read_file(again.output_path);
  for (const auto& k : done)
    EXPECT_NE(out2.find("add f32 [" + k + "]: already tuned"), std::string::npos) << k << "\n" << out2;
  database db(db_path);
  EXPECT_EQ(db.integrity_check(), "ok");
  for (int i = 1; i <= 40; ++i)
    EXPECT_TRUE(
        db.find_result(fp, "add", "f32", tuning::shape_key::parse("n=" + std::to_string(1000 + 37 * i))))
        << i;
}

// Attention shapes that differ only in KV length are one bucket with a representative at the
// geometric middle; other components, dtypes, ops without lk and KV spans over 2^16 split it.
TEST(TuningDispatch, KvLengthBucketsFoldAttentionShapes) {
  auto set = parse_shape_set(
      "shapes:\n"
      "  - {op: scaled_dot_product_attention, b: 1, hq: 8, hkv: 4, lq: 1, lk: [16, 64, 256, 1024, 4096], d: "
      "32, "
      "dv: 32, causal: 1, mask: 0}\n"
      "  - {op: scaled_dot_product_attention, b: 1, hq: 8, hkv: 4, lq: 32, lk: 32, d: 32, dv: 32, causal: 1, "
      "mask: 0}\n"
      "  - {op: scaled_dot_product_attention, dtype: f16, b: 1, hq: 8, hkv: 4, lq: 1, lk: 64, d: 32, dv: 32, "
      "causal: 1, mask: 0}\n"
      "  - {op: scaled_dot_product_attention, b: 1, hq: 8, hkv: 4, lq: 1, lk: [1, 131072], d: 64, dv: 64, "
      "causal: 1, mask: 0}\n"
      "  - {op: rms_norm, rows: [4, 8], d: 512}\n",
      "test");
  ASSERT_EQ(set.entries.size(), 11u);
  auto reps = dispatch::tuner::kv_length_buckets(set.entries);
  const std::size_t none = std::size_t(-1);
  // lk 16..4096: log2 4..12, middle 8 -> lk=256 (index 2) represents all five.
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(reps[i], 2u) << i;
  EXPECT_EQ(reps[5], 5u) << "lq differs: its own bucket";
  EXPECT_EQ(reps[6], 6u) << "f16: its own bucket";
  EXPECT_EQ(reps[7], 7u) << "1 and 131072 are 17 doublings apart: two buckets";
  EXPECT_EQ(reps[8], 8u);
  EXPECT_EQ(reps[9], none) << "rms_norm has no lk";
  EXPECT_EQ(reps[10], none);
}

// Pretune options over one KV-length bucket: decode attention at KV lengths 8, 16 and 32,
// head size d.
static dispatch::tuner::pretune_options kv_bucket_options(int d) {
  const std::string ds = std::to_string(d);
  dispatch::tuner::pretune_options o;
  o.shapes = parse_shape_set(
      "shapes:\n  - {op: scaled_dot_product_attention, b: 1, hq: 2, hkv: 2, lq: 1, "
      "lk: [8, 16, 32], d: " +
          ds + ", dv: " + ds + ", causal: 0, mask: 0}\n",
      "test");
  o.backends = {"opencl"};
  return o;
}

// Pretune measures one shape per KV-length bucket; dispatch serves the others from it.
TEST(TuningDispatch, PretuneTunesOneShapePerKvBucket) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  auto o = kv_bucket_options(16);
  o.max_per_backend = 1;
  o.min_runs = 2;
  o.max_runs = 3;
  o.target_s_per_candidate = 0.01;
  auto report = dispatch::tuner::pretune(dev, db, o);
  // The report is in tuning order: the bucket's representative, then the members it covers.
  ASSERT_EQ(report.shapes.size(), 3u);
  EXPECT_EQ(report.shapes[0].status, dispatch::tuner::shape_outcome::state::tuned) << report.shapes[0].detail;
  EXPECT_EQ(report.shapes[0].entry.shape.find("lk"), std::optional<std::int64_t>(16));
  for (int i : {1, 2}) {
    EXPECT_EQ(report.shapes[i].status, dispatch::tuner::shape_outcome::state::covered);
    EXPECT_NE(report.shapes[i].detail.find("lk=16"), std::string::npos) << report.shapes[i].detail;
  }
  EXPECT_EQ(report.shapes[1].entry.shape.find("lk"), std::optional<std::int64_t>(8));
  EXPECT_EQ(report.shapes[2].entry.shape.find("lk"), std::optional<std::int64_t>(32));
  auto summary = dispatch::tuner::summary_table(report);
  EXPECT_NE(summary.find("1 tuned, 0 already tuned, 2 in a KV-length bucket"), std::string::npos) << summary;
  dispatch::use_tuning_database();
  auto call =
      sample(q, "scaled_dot_product_attention", "b=1,hq=2,hkv=2,lq=1,lk=8,d=16,dv=16,causal=0,mask=0");
  auto r = dispatch::dispatch_call(q, call);
  q.wait();
  EXPECT_EQ(r.tier, dispatch::source_tier::db_nearest) << r.reason;
}

// A bucket's other shapes count as covered only when its representative is in the database: with
// the budget spent before the representative, all three are left (not "covered" by nothing).
TEST(TuningDispatch, PretuneLeavesABucketUntunedWhenItsShapeIsNotReached) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  auto o = kv_bucket_options(8);
  o.payoff_order = false;
  o.budget_s = 1e-9;
  auto report = dispatch::tuner::pretune(dev, db, o);
  ASSERT_EQ(report.shapes.size(), 3u);
  EXPECT_TRUE(report.budget_exhausted);
  for (const auto& s : report.shapes)
    EXPECT_EQ(s.status, dispatch::tuner::shape_outcome::state::not_reached) << s.shape << ": " << s.detail;
  auto summary = dispatch::tuner::summary_table(report);
  EXPECT_NE(summary.find("0 tuned, 0 already tuned, 0 in a KV-length bucket, 0 failed, 3 left"),
            std::string::npos)
      << summary;
}

// Payoff order: each shape's default route is timed first and the shapes are tuned largest
// default time x calls first. The counts dominate here (a million calls against one), so the
// order does not depend on the timings: the small, often-called shape comes first although the
// set lists it last; with payoff_order off the set's order holds.
TEST(TuningDispatch, PretuneTunesTheLargestPayoffFirst) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  auto o =
      quick_pretune(parse_shape_set("shapes:\n"
                                    "  - {op: rms_norm, rows: 64, d: 256, calls: 1}\n"
                                    "  - {op: rms_norm, rows: 2, d: 32, calls: 1000000}\n",
                                    "payoff"));
  auto report = dispatch::tuner::pretune(dev, db, o);
  ASSERT_EQ(report.shapes.size(), 2u);
  EXPECT_EQ(report.shapes[0].shape, "rows=2,d=32");
  EXPECT_EQ(report.shapes[0].calls, 1000000u);
  EXPECT_GT(report.shapes[0].payoff_ns, report.shapes[1].payoff_ns);
  EXPECT_EQ(report.shapes[1].shape, "rows=64,d=256");
  for (auto& s : report.shapes) EXPECT_EQ(s.status, dispatch::tuner::shape_outcome::state::tuned) << s.detail;

  o.payoff_order = false;
  auto in_file_order = dispatch::tuner::pretune(dev, db, o);
  ASSERT_EQ(in_file_order.shapes.size(), 2u);
  EXPECT_EQ(in_file_order.shapes[0].shape, "rows=64,d=256");
  EXPECT_EQ(in_file_order.shapes[1].shape, "rows=2,d=32");
}

// A short shape is timed in runs of several calls back to back (as a model's graph runs its
// kernels), each run one wait: the dispatcher's call counts show every timed run holding
// calls_per_sample calls, and pipeline_calls = 1 keeps one finished call a run. The default
// route alone is measured (CLBlast has no rms_norm), so the count is exact: the check, the
// single warm call that sizes the runs, a warm run, then the timed runs: min_runs (1), then
// more while their calls stay within max_runs (4) (a tiny kernel never sums to the 0.3 s
// target): four single calls, or one or two runs of n calls.
TEST(TuningDispatch, PretuneTimesShortShapesInRunsOfCallsBackToBack) {
  using dispatch::tuner::calls_per_sample;
  EXPECT_EQ(calls_per_sample(50e3, 20), 20);  // 50 us: 200 would fill 10 ms, capped at 20
  EXPECT_EQ(calls_per_sample(2e6, 20), 5);    // 2 ms: 5 fill 10 ms
  EXPECT_EQ(calls_per_sample(12e6, 20), 1);   // longer than the run's target: one call
  EXPECT_EQ(calls_per_sample(50e3, 1), 1);    // pipelining off
  EXPECT_EQ(calls_per_sample(0, 20), 1);      // not measured
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  auto rms_norm_calls = [] {
    std::uint64_t n = 0;
    for (auto& st : dispatch::statistics())
      if (st.op == "rms_norm") n += st.calls;
    return n;
  };
  for (int pipeline : {1, 4}) {
    dispatch::tuner::pretune_options o;
    o.shapes = parse_shape_set("shapes:\n  - {op: rms_norm, rows: 3, d: 48}\n", "pipelined");
    o.backends = {"clblast"};
    o.min_runs = 1;
    o.max_runs = 4;
    o.payoff_order = false;
    o.pipeline_calls = pipeline;
    o.force = true;
    dispatch::reset_statistics();
    auto report = dispatch::tuner::pretune(dev, db, o);
    ASSERT_EQ(report.shapes.size(), 1u);
    const auto& s = report.shapes[0];
    ASSERT_EQ(s.status, dispatch::tuner::shape_outcome::state::tuned) << s.detail;
    const std::uint64_t n = static_cast<std::uint64_t>(s.calls_per_sample);
    if (pipeline == 1) {
      EXPECT_EQ(n, 1u);
      EXPECT_EQ(rms_norm_calls(), 1u + 1u + 4u) << "check, warm call, four timed calls";
    } else {
      // One finished call of a 3x48 rms_norm is far below 5 ms on any device: at least 2 a run.
      EXPECT_GE(n, 2u);
      EXPECT_LE(n, 4u);
      const std::uint64_t runs = n == 2 ? 2 : 1;
      EXPECT_EQ(rms_norm_calls(), 1u + 1u + n + runs * n)
          << "check, sizing call, warm run, timed runs; n " << n;
    }
    EXPECT_GT(s.row.p50_ns, 0);
  }
}

// A block-quantized weight with 16-bit activations (a bf16 model's decode GEMV) is recorded with
// its `act`, pretune samples that call, and the row it stores is the one the call then finds.
// Before, the entry named only q4_0, pretune sampled f32 activations, and its row (under
// f32|q4_0|f32) never served the bf16 call.
TEST(TuningDispatch, QuantizedWeightsWith16BitActivationsRecordAndTune) {
  auto& db = test_db();
  queue q;
  auto dev = q.get_device();
  const std::string file = test::make_temp_dir("record-act") + "/untuned.yaml";
  sample_options so;
  so.type = dtype::q4_0;
  so.act = dtype::bf16;
  so.seed = 3;
  op_call call =
      op_registry::instance().get("linear").sample(q, prism::shape_key::parse("m=1,n=64,k=96"), so);
  ASSERT_EQ(call.inputs[0].type(), dtype::bf16);
  tuning::set_untuned_record_path(file, true);
  dispatch::use_tuning_database();  // decide afresh, so that the shape is looked up and recorded
  (void)dispatch::dispatch_call(q, call);
  q.wait();
  tuning::set_untuned_record_path("");
  const auto set = load_shape_set(file);
  ASSERT_EQ(set.entries.size(), 1u) << test::read_file(file);
  EXPECT_EQ(set.entries[0].dtype, "q4_0");
  EXPECT_EQ(set.entries[0].act, "bf16") << test::read_file(file);

  auto report = dispatch::tuner::pretune(dev, db, quick_pretune(set));
  ASSERT_EQ(report.shapes.size(), 1u);
  EXPECT_EQ(report.shapes[0].status, dispatch::tuner::shape_outcome::state::tuned) << report.shapes[0].detail;
  EXPECT_NE(dispatch::tuner::summary_table(report).find("linear q4_0 act=bf16 [m=1,n=64,k=96]"),
            std::string::npos)
      << dispatch::tuner::summary_table(report);
  dispatch::use_tuning_database();
  auto r = dispatch::dispatch_call(q, call);
  q.wait();
  EXPECT_EQ(r.tier, dispatch::source_tier::db_exact) << r.reason;
}

// Candidates built on several threads before the serial measurement give the same candidates
// with the same outcomes as building each as it is measured.
TEST(TuningDispatch, ParallelCompilesGiveTheSameCandidates) {
  queue q;
  auto dev = q.get_device();
  std::string dir = test::make_temp_dir("compile-threads");
  std::vector<std::set<std::string>> outcomes;
  for (unsigned threads : {4u, 1u}) {  // 4 first: its builds start from a cold program cache
    database db(dir + "/t" + std::to_string(threads) + ".db");
    auto o =
        quick_pretune(parse_shape_set("shapes:\n  - {op: softmax, rows: 3, r: 40, inner: 1}\n", "threads"));
    o.max_per_backend = 4;
    o.compile_threads = threads;
    auto report = dispatch::tuner::pretune(dev, db, o);
    ASSERT_EQ(report.shapes.size(), 1u);
    EXPECT_EQ(report.shapes[0].status, dispatch::tuner::shape_outcome::state::tuned)
        << report.shapes[0].detail;
    std::set<std::string> rows;
    for (auto& c : db.candidates(dev.fingerprint().hash, "softmax", "f32",
                                 tuning::shape_key::parse(report.shapes[0].shape)))
      rows.insert(c.backend + " " + c.config + " " + tuning::candidate_status_name(c.status));
    EXPECT_GE(rows.size(), 2u);
    outcomes.push_back(rows);
  }
  EXPECT_EQ(outcomes[0], outcomes[1]);
}
