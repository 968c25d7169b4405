// SPDX-License-Identifier: Apache-2.0
// Dispatch through the public op API on a real device (PRISM_DEVICE, PoCL here): routing
// precedence, fallback, strict mode, unused ops, vendor kernel overrides, name/YAML errors, the
// dispatch log parsed back, the exit summary, threads, and the GEMM family on every backend.
#include <gtest/gtest.h>
#include <unistd.h>
#include <algorithm>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "dispatch/backends/clblast/clblast_backend.hpp"
#include "dispatch/dispatcher.hpp"
#include "dispatch/log/dispatch_log.hpp"
#include "kernels/cl_source.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/op_support.hpp"
#include "prism/dispatch.hpp"
#include "prism/ops.hpp"
#include "prism/runtime.hpp"
#include "prism/tuning_db.hpp"
#include "tests/dispatch/test_support.hpp"

namespace fs = std::filesystem;
using namespace prism;
using prism::test::code_of;
namespace pd = prism::dispatch;

namespace {

const char* dispatch_vars[] = {"PRISM_OP_add",
                               "PRISM_OP_mm",
                               "PRISM_OP_relu",
                               "PRISM_OP_matmull",
                               "PRISM_ROUTES",
                               "PRISM_UNUSED",
                               "PRISM_STRICT_ROUTES",
                               "PRISM_LOG_DISPATCH",
                               "PRISM_LOG_DISPATCH_FILE",
                               "PRISM_LOG_DISPATCH_FILTER",
                               "PRISM_VENDOR",
                               "PRISM_VENDOR_PATH"};

using env_vars = std::map<std::string, std::string>;

// Sets dispatch env variables for one test and restores a clean configuration afterwards.
class env_scope {
 public:
  explicit env_scope(const env_vars& vars) {
    clear();
    // The tuning glue installs the database lookup at load; a tuned database on this machine
    // must not change what these tests expect (tests that need tier 3 install their own).
    pd::set_tuning_lookup({});
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  env_scope(const env_scope&) = delete;
  ~env_scope() {
    clear();
    pd::set_tuning_lookup({});
    pd::testing::reload_config();
  }
  static void clear() {
    for (const char* v : dispatch_vars) ::unsetenv(v);
  }
};

struct temp_dir {
  fs::path path;
  temp_dir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("prism_dispatch_dev_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    auto p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

queue& test_queue() {
  static auto* q = new queue(default_selector_v, queue_options{.enable_profiling = true});
  return *q;
}

[[maybe_unused]] const auto* const drain_queue_env = prism::test::drain_before_exit(&test_queue);

tensor vec(queue& q, std::vector<float> v) {
  return tensor::from_floats(q, v, dims{static_cast<std::int64_t>(v.size())}, dtype::f32);
}

op_call add_call(queue& q) {
  op_call c;
  c.op = "add";
  c.inputs = {vec(q, {1, 2, 3, 4}), vec(q, {10, 20, 30, 40})};
  c.attrs = {{"alpha", 1.0}};
  return c;
}

pd::dispatch_result dispatch_add(queue& q, std::vector<float>* out = nullptr) {
  auto c = add_call(q);
  auto r = pd::dispatch_call(q, c);
  if (out) *out = c.outputs[0].to_floats(q);
  return r;
}

}  // namespace

// Every subset of {env, routes file, tuning db, vendor profile} above the built-in order: the
// highest source present decides, and the result says which.
TEST(Dispatch, EveryPrecedenceCombination) {
  auto& q = test_queue();
  temp_dir d;
  auto routes = d.write("routes.yaml", "routes:\n  add: opencl\n");
  d.write("vendors/acme/vendor.yaml", "name: acme\npriority: 100\nroutes: {add: host}\n");
  for (int mask = 0; mask < 16; ++mask) {
    SCOPED_TRACE("mask " + std::to_string(mask));
    std::map<std::string, std::string> vars;
    if (mask & 8) vars["PRISM_OP_add"] = "host";
    if (mask & 4) vars["PRISM_ROUTES"] = routes;
    if (mask & 1) vars["PRISM_VENDOR_PATH"] = (d.path / "vendors").string();
    env_scope env(vars);
    pd::testing::reload_config();
    int lookups = 0;
    if (mask & 2)
      pd::set_tuning_lookup([&lookups](const pd::tuning_query& k) -> std::optional<pd::tuned_choice> {
        ++lookups;
        if (k.op != "add") return std::nullopt;
        return pd::tuned_choice{"opencl", "", pd::source_tier::db_nearest};
      });
    std::vector<float> out;
    auto r = dispatch_add(q, &out);
    EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 44}));
    if (mask & 8) {
      EXPECT_EQ(r.tier, pd::source_tier::env);
      EXPECT_EQ(r.backend, "host");
      EXPECT_EQ(r.reason, "PRISM_OP_add");
      EXPECT_EQ(lookups, 0) << "env outranks the tuning db";
    } else if (mask & 4) {
      EXPECT_EQ(r.tier, pd::source_tier::routes);
      EXPECT_EQ(r.backend, "opencl");
      EXPECT_EQ(r.reason, routes + ":2");
      EXPECT_EQ(lookups, 0) << "the routes file outranks the tuning db";
    } else if (mask & 2) {
      EXPECT_EQ(r.tier, pd::source_tier::db_nearest);
      EXPECT_EQ(r.backend, "opencl");
      EXPECT_EQ(lookups, 1);
    } else if (mask & 1) {
      EXPECT_EQ(r.tier, pd::source_tier::vendor);
      EXPECT_EQ(r.backend, "host");
      EXPECT_NE(r.reason.find("acme/vendor.yaml:3"), std::string::npos) << r.reason;
    } else {
      EXPECT_EQ(r.tier, pd::source_tier::default_order);
      EXPECT_EQ(r.backend, "opencl");
    }
  }
}

TEST(Dispatch, InvalidTuningDbChoicesAreIgnored) {
  auto& q = test_queue();
  env_scope env(env_vars{});
  pd::testing::reload_config();
  pd::set_tuning_lookup([](const pd::tuning_query&) -> std::optional<pd::tuned_choice> {
    return pd::tuned_choice{"opencl", "wg=3,nosuch=1", pd::source_tier::db_exact};
  });
  std::vector<float> out;
  auto r = dispatch_add(q, &out);
  EXPECT_EQ(r.tier, pd::source_tier::default_order);
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 44}));
  pd::set_tuning_lookup([](const pd::tuning_query&) -> std::optional<pd::tuned_choice> {
    return pd::tuned_choice{"clblast", "", pd::source_tier::db_exact};  // clblast has no add
  });
  EXPECT_EQ(dispatch_add(q).tier, pd::source_tier::default_order);
  pd::set_tuning_lookup([](const pd::tuning_query&) -> std::optional<pd::tuned_choice> {
    return pd::tuned_choice{"host", "", pd::source_tier::db_exact};
  });
  auto h = dispatch_add(q);
  EXPECT_EQ(h.tier, pd::source_tier::db_exact);
  EXPECT_EQ(h.backend, "host");
}

TEST(Dispatch, TuningLookupIsMemoizedPerShapeAndGetsTheKey) {
  auto& q = test_queue();
  env_scope env(env_vars{});
  pd::testing::reload_config();
  std::vector<std::string> keys;
  pd::set_tuning_lookup([&keys](const pd::tuning_query& k) -> std::optional<pd::tuned_choice> {
    keys.push_back(std::string(k.op) + " " + std::string(k.dtypes) + " " + std::string(k.shape_key) + " " +
                   std::string(k.device_fingerprint));
    return std::nullopt;
  });
  dispatch_add(q);
  dispatch_add(q);
  ASSERT_EQ(keys.size(), 1u) << "one lookup per (device, op, dtypes, shape)";
  EXPECT_EQ(keys[0].rfind("add f32|f32 n=4 ", 0), 0u) << keys[0];
  EXPECT_NE(keys[0].find(q.get_device().fingerprint().hash), std::string::npos);
}

// Rows that changed behind the memo (a PostgreSQL snapshot refresh, another database file)
// are looked up again, and recorded graphs learn it through routing_generation().
TEST(Dispatch, ChangedTuningRowsAreLookedUpAgain) {
  auto& q = test_queue();
  env_scope env(env_vars{});
  pd::testing::reload_config();
  int lookups = 0;
  pd::set_tuning_lookup([&lookups](const pd::tuning_query&) -> std::optional<pd::tuned_choice> {
    ++lookups;
    return std::nullopt;
  });
  const std::string original = tuning::database::process_default().path();
  dispatch_add(q);
  dispatch_add(q);
  ASSERT_EQ(lookups, 1);
  const auto generation = pd::routing_generation();
  const auto changes = tuning::database::changes();
  temp_dir d;
  tuning::database::set_default_path((d.path / "other.db").string());
  EXPECT_GT(tuning::database::changes(), changes);
  dispatch_add(q);
  EXPECT_EQ(lookups, 2) << "the decision made with the old database's rows was kept";
  EXPECT_GT(pd::routing_generation(), generation);
  dispatch_add(q);
  EXPECT_EQ(lookups, 2);
  tuning::database::set_default_path(original);
}

TEST(Dispatch, EnvOverridesAnOpNoFileNames) {
  auto& q = test_queue();
  temp_dir d;
  auto routes = d.write("routes.yaml", "routes: {mm: host}\n");
  env_scope env(env_vars{{"PRISM_ROUTES", routes}, {"PRISM_OP_relu", "host"}});
  pd::testing::reload_config();
  op_call c;
  c.op = "relu";
  c.inputs = {vec(q, {-1, 2})};
  auto r = pd::dispatch_call(q, c);
  EXPECT_EQ(r.backend, "host");
  EXPECT_EQ(r.tier, pd::source_tier::env);
  EXPECT_EQ(c.outputs[0].to_floats(q), (std::vector<float>{0, 2}));
}

TEST(Dispatch, FallbackOnUnsupportedDtypeAndShape) {
  auto& q = test_queue();
  env_scope env(env_vars{{"PRISM_OP_mm", "clblast"}});
  pd::testing::reload_config();
  std::vector<float> av(6 * 4), bv(4 * 6);
  for (std::size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i % 5) - 2;
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i % 3) - 1;
  // bf16: clblast refuses, opencl serves.
  {
    op_call c;
    c.op = "mm";
    c.inputs = {tensor::from_floats(q, av, {6, 4}, dtype::bf16),
                tensor::from_floats(q, bv, {4, 6}, dtype::bf16)};
    auto r = pd::dispatch_call(q, c);
    EXPECT_EQ(r.tier, pd::source_tier::fallback);
    EXPECT_EQ(r.backend, "opencl");
    EXPECT_NE(r.reason.find("clblast: bf16 not supported"), std::string::npos) << r.reason;
  }
  // A layout BLAS cannot express (no unit stride in either dim): clblast refuses the shape.
  {
    tensor big = tensor::from_floats(q, std::vector<float>(12 * 8, 1.0f), {12, 8}, dtype::f32);
    tensor a = big.slice(0, 0, 12, 2).slice(1, 0, 8, 2);  // [6, 4], strides [16, 2]
    op_call c;
    c.op = "mm";
    c.inputs = {a, tensor::from_floats(q, bv, {4, 6}, dtype::f32)};
    auto r = pd::dispatch_call(q, c);
    EXPECT_EQ(r.tier, pd::source_tier::fallback);
    EXPECT_NE(r.backend, "clblast");
    EXPECT_NE(r.reason.find("no unit stride"), std::string::npos) << r.reason;
    auto expected = compute_reference(q, op_registry::instance().get("mm"), c);
    std::vector<host_tensor> got{read_host(q, c.outputs[0])};
    EXPECT_TRUE(compare_outputs(op_registry::instance().get("mm"), c, expected, got).ok);
  }
}

TEST(Dispatch, ClblastF16NeedsTheExtension) {
  auto& q = test_queue();
  env_scope env(env_vars{{"PRISM_OP_mm", "clblast"}});
  pd::testing::reload_config();
  op_call c;
  c.op = "mm";
  c.inputs = {tensor::from_floats(q, std::vector<float>(6, 1.f), {2, 3}, dtype::f16),
              tensor::from_floats(q, std::vector<float>(6, 2.f), {3, 2}, dtype::f16)};
  auto r = pd::dispatch_call(q, c);
  if (q.get_device().has_fp16()) {
    EXPECT_EQ(r.backend, "clblast");
    EXPECT_EQ(r.tier, pd::source_tier::env);
  } else {
    EXPECT_EQ(r.tier, pd::source_tier::fallback);
    EXPECT_NE(r.reason.find("clblast: f16 needs cl_khr_fp16"), std::string::npos) << r.reason;
  }
  EXPECT_EQ(c.outputs[0].to_floats(q), (std::vector<float>{6, 6, 6, 6}));
}

TEST(Dispatch, ForcedVendorProfile) {
  auto& q = test_queue();
  env_scope env(env_vars{{"PRISM_VENDOR", "nvidia"}});
  pd::testing::reload_config();
  EXPECT_EQ(pd::matched_vendor(q.get_device()).name, "nvidia");
  auto routes = pd::effective_routes(q.get_device());
  auto mm = std::find_if(routes.begin(), routes.end(), [](auto& e) { return e.op == "mm"; });
  ASSERT_NE(mm, routes.end());
  EXPECT_EQ(mm->backend, "opencl");  // prism's NVIDIA GEMM family (vendors/nvidia/vendor.yaml)
  EXPECT_EQ(mm->tier, pd::source_tier::vendor);
  EXPECT_NE(mm->origin.find("nvidia/vendor.yaml:"), std::string::npos) << mm->origin;
  EXPECT_EQ(mm->order, (std::vector<std::string>{"opencl", "clblast", "host"}));
}

// The nvidia profile's decode routes for block-quantized weights (vendors/nvidia/vendor.yaml): the
// qkv projection (rms_norm_linear) takes int8 activations at K >= 4096 only (q8_0 and q4 walked a
// lane per block, quantized by the GEMV itself: qp=3), and
// post_attention runs 128-item groups of 2 units a task for quantized weights, chained on float
// activations, and at hidden >= 4096 four launches on int8 ones (qf=1, qo=1).
TEST(Dispatch, NvidiaRoutesQuantizedDecodeByBitsAndK) {
  auto& q = test_queue();
  env_scope env(env_vars{{"PRISM_VENDOR", "nvidia"}});
  pd::testing::reload_config();
  const op_descriptor& rnl = op_registry::instance().get("rms_norm_linear");
  std::mt19937_64 rng(7);
  auto norm_linear = [&](dtype wt, std::int64_t k) {
    op_call c{"rms_norm_linear", {}, {}, {}};
    c.inputs = {kernels::random_tensor(q, {1, k}, dtype::bf16, rng, -1, 1),
                kernels::random_tensor(q, {k}, dtype::bf16, rng, 0.5, 1.5),
                kernels::random_tensor(q, {16, k}, wt, rng, -1, 1), tensor()};
    c.attrs["eps"] = 1e-6;
    allocate_outputs(q, rnl, c);
    return pd::dispatch_call(q, c);
  };
  const auto q4_long = norm_linear(dtype::q4_0, 4096);
  EXPECT_EQ(q4_long.tier, pd::source_tier::vendor);
  EXPECT_EQ(q4_long.implementation, "opencl.quant_norm");
  EXPECT_NE(q4_long.config.find("qa=1"), std::string::npos) << q4_long.config;
  EXPECT_NE(q4_long.config.find("qp=3"), std::string::npos) << q4_long.config;
  // qp=3's group is the config's nb and wg: 8 teams of 4 rows (session 29's measured shape), 4
  // blocks a lane a step for q4 (session 37).
  EXPECT_NE(q4_long.config.find("nb=4,wg=256"), std::string::npos) << q4_long.config;
  EXPECT_NE(q4_long.config.find("qu=4"), std::string::npos) << q4_long.config;
  EXPECT_NE(q4_long.reason.find("nvidia/vendor.yaml:"), std::string::npos) << q4_long.reason;
  const auto q8_long = norm_linear(dtype::q8_0, 4096);
  EXPECT_EQ(q8_long.tier, pd::source_tier::vendor);
  EXPECT_NE(q8_long.config.find("qa=1"), std::string::npos) << q8_long.config;
  EXPECT_NE(q8_long.config.find("qp=3"), std::string::npos) << q8_long.config;
  for (const auto& other : {norm_linear(dtype::q4_0, 1024), norm_linear(dtype::q8_0, 1024)}) {
    EXPECT_EQ(other.implementation, "opencl.quant_norm");
    EXPECT_NE(other.config.find("qa=0"), std::string::npos) << other.config;
  }
  const op_descriptor& pa = op_registry::instance().get("post_attention");
  sample_options o;
  o.type = dtype::q4_0;
  op_call c = pa.sample(q, shape_key::parse("m=1,h=64,a=64,i=96"), o);
  const auto block = pd::dispatch_call(q, c);
  EXPECT_EQ(block.tier, pd::source_tier::vendor);
  EXPECT_NE(block.config.find("nb=2"), std::string::npos) << block.config;
  EXPECT_NE(block.config.find("wg=128"), std::string::npos) << block.config;
  EXPECT_NE(block.config.find("qa=0"), std::string::npos) << block.config;
  // Quantized weights at hidden >= 4096: int8 activations (stage 1 too), block pairs, the quantize
  // steps inside the stages (qf=1); stage 1 quantizes in each task's local memory (qo=2), stages 1
  // and 2 in whole-block tasks (qb=1): three launches (an attention width that is not whole pairs,
  // 32 here, takes qo=1's step inside the op), for q4 and q8_0 alike.
  for (dtype wt : {dtype::q4_0, dtype::q8_0}) {
    o.type = wt;
    op_call wide = pa.sample(q, shape_key::parse("m=1,h=4096,a=32,i=64"), o);
    const auto d = pd::dispatch_call(q, wide);
    EXPECT_EQ(d.tier, pd::source_tier::vendor);
    for (const char* key : {"qa=1", "qp=1", "chain=0", "qf=1"})
      EXPECT_NE(d.config.find(key), std::string::npos) << dtype_name(wt) << " " << d.config;
    EXPECT_NE(d.config.find("qo=2"), std::string::npos) << dtype_name(wt) << " " << d.config;
    EXPECT_NE(d.config.find("qb=1"), std::string::npos) << dtype_name(wt) << " " << d.config;
    // Stage 3 keeps nb: 2 units a task for q4 (measured there), 4 for q8_0; stage 1's whole-block
    // tasks run 8 warps for q4 (qw1=8), 4 for q8_0 (the default, which the config leaves out).
    EXPECT_NE(d.config.find(wt == dtype::q4_0 ? "nb=2,wg=64" : "nb=4,wg=64"), std::string::npos)
        << dtype_name(wt) << " " << d.config;
    EXPECT_NE(d.config.find(wt == dtype::q4_0 ? "qw1=8" : "qw1=4"), std::string::npos)
        << dtype_name(wt) << " " << d.config;
  }
  // An MLP width that is not whole block pairs takes the same route (its walk reads 4-byte slots).
  o.type = dtype::q4_0;
  op_call odd = pa.sample(q, shape_key::parse("m=1,h=4096,a=32,i=96"), o);
  const auto slots = pd::dispatch_call(q, odd);
  EXPECT_EQ(slots.tier, pd::source_tier::vendor) << slots.reason;
  EXPECT_NE(slots.config.find("qa=1"), std::string::npos) << slots.config;
  // linear at M = 1 on a quantized weight with K >= 4096: the GEMV that quantizes its row itself
  // (qp=3), 4 weight rows a warp from N = 16384, 2 below; not at M = 2 or K = 1024.
  const op_descriptor& lin = op_registry::instance().get("linear");
  auto linear = [&](std::int64_t m, std::int64_t n, std::int64_t k) {
    op_call c{"linear", {}, {}, {}};
    c.inputs = {kernels::random_tensor(q, {m, k}, dtype::f32, rng, -1, 1),
                kernels::random_tensor(q, {n, k}, dtype::q4_0, rng, -1, 1), tensor()};
    allocate_outputs(q, lin, c);
    return pd::dispatch_call(q, c);
  };
  const auto gemv = linear(1, 64, 4096);
  EXPECT_EQ(gemv.tier, pd::source_tier::vendor) << gemv.reason;
  for (const char* key : {"variant=4", "nb=2", "qa=1", "qp=3"})
    EXPECT_NE(gemv.config.find(key), std::string::npos) << gemv.config;
  for (const auto& other : {linear(2, 64, 4096), linear(1, 64, 1024)})
    EXPECT_EQ(other.config.find("qp=3"), std::string::npos) << other.config;
}

// The nvidia profile's decode_attention: 128-key chunks on 256-item groups for f32 caches of 4096
// rows or more; 32-key chunks on at most 32 groups along the keys (sp) for bf16, two rows a warp,
// and for shorter f32 caches (d = 256: PoCL runs variant 3 at wg <= d only).
TEST(Dispatch, NvidiaRoutesLongF32DecodeAttentionToLongChunks) {
  auto& q = test_queue();
  env_scope env(env_vars{{"PRISM_VENDOR", "nvidia"}});
  pd::testing::reload_config();
  const op_descriptor& da = op_registry::instance().get("decode_attention");
  auto route = [&](dtype t, std::int64_t max_seq) {
    sample_options o;
    o.type = t;
    const std::string key = "heads=2,kv_heads=1,d=256,max_seq=" + std::to_string(max_seq) + ",qk_norm=0";
    op_call c = da.sample(q, shape_key::parse(key), o);
    return pd::dispatch_call(q, c);
  };
  const auto long_f32 = route(dtype::f32, 4096);
  EXPECT_EQ(long_f32.tier, pd::source_tier::vendor) << long_f32.reason;
  EXPECT_NE(long_f32.config.find("wg=256"), std::string::npos) << long_f32.config;
  EXPECT_NE(long_f32.config.find("chunk=128"), std::string::npos) << long_f32.config;
  EXPECT_EQ(long_f32.config.find("sp=32"), std::string::npos) << long_f32.config;
  for (const auto& other : {route(dtype::bf16, 4096), route(dtype::f32, 4095)}) {
    EXPECT_EQ(other.tier, pd::source_tier::vendor) << other.reason;
    EXPECT_NE(other.config.find("chunk=32"), std::string::npos) << other.config;
    EXPECT_NE(other.config.find("sp=32"), std::string::npos) << other.config;
  }
  EXPECT_NE(route(dtype::bf16, 4096).config.find("hr=1"), std::string::npos);
}

TEST(Dispatch, FallbackOnInjectedLaunchFailureAndStrictMode) {
  auto& q = test_queue();
  {
    env_scope env(env_vars{});
    pd::testing::reload_config();
    pd::testing::inject_launch_failure("add", "opencl", 1);
    std::vector<float> out;
    auto r = dispatch_add(q, &out);
    EXPECT_EQ(r.tier, pd::source_tier::fallback);
    EXPECT_EQ(r.backend, "host");
    EXPECT_NE(r.reason.find("injected launch failure"), std::string::npos) << r.reason;
    EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 44}));
    EXPECT_EQ(dispatch_add(q).backend, "opencl") << "the injection is used up";
  }
  {
    env_scope env(env_vars{{"PRISM_STRICT_ROUTES", "1"}});
    pd::testing::reload_config();
    pd::testing::inject_launch_failure("add", "opencl", 1);
    std::string what;
    EXPECT_EQ(code_of([&] { dispatch_add(q); }, &what), errc::unsupported);
    EXPECT_NE(what.find("PRISM_STRICT_ROUTES"), std::string::npos) << what;
    EXPECT_EQ(dispatch_add(q).backend, "opencl");
  }
  {
    env_scope env(env_vars{{"PRISM_STRICT_ROUTES", "1"}, {"PRISM_OP_mm", "clblast"}});
    pd::testing::reload_config();
    op_call c;
    c.op = "mm";
    c.inputs = {tensor::from_floats(q, std::vector<float>(4, 1.f), {2, 2}, dtype::bf16),
                tensor::from_floats(q, std::vector<float>(4, 1.f), {2, 2}, dtype::bf16)};
    std::string what;
    EXPECT_EQ(code_of([&] { pd::dispatch_call(q, c); }, &what), errc::unsupported);
    EXPECT_NE(what.find("bf16 not supported"), std::string::npos) << what;
  }
}

TEST(Dispatch, UnusedOpsGoToHost) {
  auto& q = test_queue();
  temp_dir d;
  auto routes = d.write("routes.yaml", "unused: [relu]\n");
  env_scope env(env_vars{{"PRISM_UNUSED", "add"}, {"PRISM_ROUTES", routes}});
  pd::testing::reload_config();
  std::vector<float> out;
  auto r = dispatch_add(q, &out);
  EXPECT_EQ(r.backend, "host");
  EXPECT_EQ(r.tier, pd::source_tier::env);
  EXPECT_NE(r.reason.find("PRISM_UNUSED"), std::string::npos);
  EXPECT_EQ(out, (std::vector<float>{11, 22, 33, 44}));
  op_call c;
  c.op = "relu";
  c.inputs = {vec(q, {-3, 3})};
  auto rr = pd::dispatch_call(q, c);
  EXPECT_EQ(rr.backend, "host");
  EXPECT_EQ(rr.tier, pd::source_tier::routes);
  auto table = pd::effective_routes(q.get_device());
  auto it = std::find_if(table.begin(), table.end(), [](auto& e) { return e.op == "add"; });
  ASSERT_NE(it, table.end());
  EXPECT_TRUE(it->unused);
  EXPECT_EQ(it->origin, "PRISM_UNUSED");
}

// A profile from PRISM_VENDOR_PATH replaces add's kernel file; the log names the override and
// the result shows the replaced kernel ran.
TEST(Dispatch, VendorProfileFromPathOverridesAKernel) {
  auto& q = test_queue();
  temp_dir d;
  std::string src(embedded_kernel_source("elementwise.cl"));
  const std::string body = "return x + (T)(alpha) * y;";
  auto at = src.find(body);
  ASSERT_NE(at, std::string::npos) << "add's kernel body changed; update this test";
  src.replace(at, body.size(), "return x + (T)(alpha) * y + (T)(1000.0f);");
  d.write("vendors/acme/vendor.yaml",
          "name: acme\npriority: 100\nmatch:\n  device_type: [cpu, gpu, accelerator]\n");
  d.write("vendors/acme/kernels/elementwise.cl", src);
  d.write("vendors/acme/tune_configs.yaml",
          "version: 1\nops:\n  - op: add\n    default: {wg: 64, vec: 2, ept: 2}\n");
  env_scope env(env_vars{{"PRISM_VENDOR_PATH", (d.path / "vendors").string()},
                         {"PRISM_LOG_DISPATCH", "1"},
                         {"PRISM_LOG_DISPATCH_FILE", (d.path / "log.csv").string()}});
  pd::testing::reload_config();
  EXPECT_EQ(pd::matched_vendor(q.get_device()).name, "acme");
  std::vector<float> out;
  dispatch_add(q, &out);
  EXPECT_EQ(out, (std::vector<float>{1011, 1022, 1033, 1044}));
  std::stringstream log(d.read("log.csv"));
  auto recs = pd::parse_log(log);
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs.back().op, "add");
  EXPECT_NE(recs.back().reason.find("kernel override"), std::string::npos) << recs.back().reason;
  EXPECT_NE(recs.back().reason.find("acme/kernels/elementwise.cl"), std::string::npos) << recs.back().reason;
  EXPECT_EQ(recs.back().config, "wg=64,vec=2,ept=2") << "the profile's own tune_configs.yaml default";
}

TEST(Dispatch, UnknownNamesAndMalformedYamlStopAtStartup) {
  std::string what;
  {
    env_scope env(env_vars{{"PRISM_OP_matmull", "opencl"}});
    EXPECT_EQ(code_of([] { pd::testing::reload_config(); }, &what), errc::not_found);
    EXPECT_NE(what.find("unknown op 'matmull'"), std::string::npos) << what;
    EXPECT_NE(what.find("valid ops:"), std::string::npos) << what;
  }
  {
    env_scope env(env_vars{{"PRISM_OP_mm", "cublas"}});
    EXPECT_EQ(code_of([] { pd::testing::reload_config(); }, &what), errc::not_found);
    EXPECT_NE(what.find("valid backends: opencl, clblast, host"), std::string::npos) << what;
  }
  temp_dir d;
  auto bad = d.write("bad.yaml", "routes:\n  mm: host\n  add: {backend: [\n");
  {
    env_scope env(env_vars{{"PRISM_ROUTES", bad}});
    EXPECT_EQ(code_of([] { pd::testing::reload_config(); }, &what), errc::config_error);
    EXPECT_NE(what.find(bad + ":"), std::string::npos) << what;
  }
  auto bad_config = d.write("cfg.yaml", "routes:\n  mm: {backend: clblast, config: \"KWG=16,NOPE=1\"}\n");
  {
    env_scope env(env_vars{{"PRISM_ROUTES", bad_config}});
    EXPECT_EQ(code_of([] { pd::testing::reload_config(); }, &what), errc::config_error);
    EXPECT_NE(what.find(bad_config + ":2"), std::string::npos) << what;
    EXPECT_NE(what.find("NOPE"), std::string::npos) << what;
  }
  {
    env_scope env(env_vars{{"PRISM_VENDOR", "nosuchvendor"}});
    EXPECT_EQ(code_of([] { pd::testing::reload_config(); }, &what), errc::not_found);
    EXPECT_NE(what.find("generic"), std::string::npos) << what;
  }
}

TEST(Dispatch, LogLinesParseBackWithRejectsAndProfile) {
  auto& q = test_queue();
  temp_dir d;
  env_scope env(env_vars{{"PRISM_OP_mm", "clblast"},
                         {"PRISM_LOG_DISPATCH", "profile,dispatch"},
                         {"PRISM_LOG_DISPATCH_FILE", (d.path / "log.csv").string()}});
  pd::testing::reload_config();
  dispatch_add(q);
  op_call c;
  c.op = "mm";
  c.inputs = {tensor::from_floats(q, std::vector<float>(4, 1.f), {2, 2}, dtype::bf16),
              tensor::from_floats(q, std::vector<float>(4, 1.f), {2, 2}, dtype::bf16)};
  pd::dispatch_call(q, c);
  auto text = d.read("log.csv");
  EXPECT_EQ(text.rfind(pd::log_header() + "\n", 0), 0u) << text;
  std::stringstream s(text);
  auto recs = pd::parse_log(s);
  ASSERT_GE(recs.size(), 3u) << text;
  const auto& add = recs[0];
  EXPECT_EQ(add.event, "exec");
  EXPECT_EQ(add.op, "add");
  EXPECT_EQ(add.dtypes, "f32|f32");
  EXPECT_EQ(add.shape, "n=4");
  EXPECT_EQ(add.device, q.get_device().fingerprint().hash);
  EXPECT_EQ(add.backend, "opencl");
  EXPECT_EQ(add.tier, "default");
  EXPECT_FALSE(add.config.empty());
  EXPECT_EQ(parse_attrs(add.attrs), (attr_map{{"alpha", 1.0}}));
  ASSERT_TRUE(add.time_us);
  EXPECT_GE(*add.time_us, 0.0);
  EXPECT_EQ(add.pid, static_cast<std::int64_t>(::getpid()));
  EXPECT_EQ(add.timestamp.size(), std::string("2026-11-23T05:10:00.123456Z").size()) << add.timestamp;
  EXPECT_EQ(add.implementation.rfind("opencl.", 0), 0u) << add.implementation;
  EXPECT_TRUE(add.compile_us);  // profile mode: kernel builds are reported apart
  EXPECT_TRUE(add.borrowed_shape.empty());
  EXPECT_EQ(recs[1].event, "reject");
  EXPECT_EQ(recs[1].backend, "clblast");
  EXPECT_NE(recs[1].reason.find("bf16 not supported"), std::string::npos);
  // How many candidates are refused before one serves depends on the device's vendor profile
  // (NVIDIA's refuses one more), so look for the line that executed mm, not a position.
  auto served = std::find_if(recs.begin() + 2, recs.end(),
                             [](const auto& r) { return r.event == "exec" && r.op == "mm"; });
  ASSERT_NE(served, recs.end()) << text;
  EXPECT_EQ(served->tier, "fallback");
  EXPECT_EQ(served->dtypes, "bf16|bf16");
  for (auto r = recs.begin() + 1; r != served; ++r) EXPECT_EQ(r->event, "reject") << text;
}

// A db-nearest line names the tuned row it borrowed; in profile mode the first call's kernel
// build goes to compile_us, not time_us, and the second call builds nothing.
TEST(Dispatch, LogNamesTheBorrowedRowAndKeepsKernelBuildsApart) {
  auto& q = test_queue();
  temp_dir d;
  env_scope env(env_vars{{"PRISM_LOG_DISPATCH", "profile"},
                         {"PRISM_LOG_DISPATCH_FILE", (d.path / "log.csv").string()}});
  pd::testing::reload_config();
  pd::set_tuning_lookup([](const pd::tuning_query&) -> std::optional<pd::tuned_choice> {
    // A config no other test builds, so this process compiles it on the first call.
    return pd::tuned_choice{"opencl", "wg=64,vec=2,ept=8", pd::source_tier::db_nearest, "n=8"};
  });
  auto r = dispatch_add(q);
  EXPECT_NE(r.reason.find("(row n=8)"), std::string::npos) << r.reason;
  dispatch_add(q);
  pd::set_tuning_lookup({});
  auto text = d.read("log.csv");
  std::stringstream s(text);
  auto recs = pd::parse_log(s);
  ASSERT_EQ(recs.size(), 2u) << text;
  EXPECT_EQ(recs[0].tier, "db-nearest");
  EXPECT_EQ(recs[0].borrowed_shape, "n=8");
  ASSERT_TRUE(recs[0].compile_us && recs[0].time_us) << text;
  EXPECT_GT(*recs[0].compile_us, 0.0) << text;
  ASSERT_TRUE(recs[1].compile_us) << text;
  EXPECT_EQ(*recs[1].compile_us, 0.0) << text;
}

TEST(Dispatch, LogFilterKeepsMatchingLines) {
  auto& q = test_queue();
  temp_dir d;
  env_scope env(env_vars{{"PRISM_LOG_DISPATCH", "1"},
                         {"PRISM_LOG_DISPATCH_FILTER", ",relu,"},
                         {"PRISM_LOG_DISPATCH_FILE", (d.path / "log.csv").string()}});
  pd::testing::reload_config();
  dispatch_add(q);
  ops::relu(q, vec(q, {1, -1}));
  std::stringstream s(d.read("log.csv"));
  auto recs = pd::parse_log(s);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].op, "relu");
}

TEST(DispatchDeathTest, ExitSummaryPrintsCountsPerOpAndBackend) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        env_scope::clear();
        pd::set_tuning_lookup({});
        ::setenv("PRISM_LOG_DISPATCH", "1", 1);
        ::setenv("PRISM_OP_relu", "host", 1);
        pd::testing::reload_config();
        auto& q = test_queue();
        dispatch_add(q);
        dispatch_add(q);
        ops::relu(q, vec(q, {1, -1}));
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "prism dispatch summary\n.*\nadd +opencl +default +2 +0\n.*relu +host +env +1 +0\n"
      "tuning database hits: 0 of 3 calls");
}

TEST(Dispatch, EightThreadsOnOneQueueAndOnEightQueues) {
  env_scope env(env_vars{});
  pd::testing::reload_config();
  pd::reset_statistics();
  auto worker = [](queue& q, int t, std::vector<int>& failures) {
    for (int i = 0; i < 10; ++i) {
      float base = static_cast<float>(t * 100 + i);
      auto a = vec(q, {base, base + 1, base + 2});
      auto b = vec(q, {1, 1, 1});
      auto c = ops::add(q, a, b, 2.0);
      auto got = c.to_floats(q);
      if (got != std::vector<float>{base + 2, base + 3, base + 4}) ++failures[t];
    }
  };
  std::vector<int> failures(8, 0);
  {
    auto& q = test_queue();
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) threads.emplace_back([&, t] { worker(q, t, failures); });
    for (auto& th : threads) th.join();
  }
  {
    std::vector<std::unique_ptr<queue>> queues;
    for (int t = 0; t < 8; ++t) queues.push_back(std::make_unique<queue>(test_queue().get_device()));
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) threads.emplace_back([&, t] { worker(*queues[t], t, failures); });
    for (auto& th : threads) th.join();
  }
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  std::uint64_t adds = 0;
  for (const auto& s : pd::statistics())
    if (s.op == "add") adds += s.calls;
  EXPECT_EQ(adds, 160u);
}

// The GEMM family on each backend (forced) against the host reference, including transposed
// operand views and bias.
TEST(Dispatch, GemmFamilyOnEveryBackendMatchesTheReference) {
  auto& q = test_queue();
  env_scope env(env_vars{});
  pd::testing::reload_config();
  sample_options so;
  so.seed = 7;
  struct gemm_case {
    std::string op, key;
    attr_map attrs;
  };
  const std::vector<gemm_case> cases = {{"mm", "m=33,n=17,k=9", {}},
                                        {"mm", "m=16,n=8,k=12,ta=1", {}},
                                        {"bmm", "b=3,m=5,n=7,k=6", {}},
                                        {"addmm", "m=9,n=10,k=11", {{"alpha", 0.5}, {"beta", 2.0}}},
                                        {"linear", "m=6,n=5,k=7", {}}};
  for (const auto& c : cases) {
    const auto& desc = op_registry::instance().get(c.op);
    for (const std::string variant : {"opencl", "clblast", "host", "host-copying"}) {
      const std::string backend = variant == "host-copying" ? "host" : variant;
      pd::testing::host_backend_copies(variant == "host-copying");
      SCOPED_TRACE(c.op + " " + c.key + " on " + variant);
      op_call call;
      try {
        call = desc.sample(q, shape_key::parse(c.key), so);
      } catch (const prism::error& e) {
        ADD_FAILURE() << e.what();
        continue;
      }
      for (const auto& [k, v] : c.attrs) call.attrs[k] = v;
      auto expected = compute_reference(q, desc, call);
      pd::forced_route f{backend, std::nullopt};
      try {
        auto r = pd::dispatch_call(q, call, &f);
        EXPECT_EQ(r.backend, backend);
      } catch (const prism::error& e) {
        ADD_FAILURE() << e.what();
        continue;
      }
      std::vector<host_tensor> got;
      for (const auto& t : call.outputs) got.push_back(read_host(q, t));
      auto cmp = compare_outputs(desc, call, expected, got);
      EXPECT_TRUE(cmp.ok) << cmp.message;
    }
  }
  pd::testing::host_backend_copies(false);
}

// Forced routes are memoized by backend and config text: the same call forced with another
// config, or with none, runs that one, not the first one's decision.
TEST(Dispatch, ForcedRoutesKeepTheirOwnConfig) {
  auto& q = test_queue();
  env_scope env(env_vars{});
  pd::testing::reload_config();
  const auto& desc = op_registry::instance().get("add");
  sample_options so;
  op_call call = desc.sample(q, shape_key::parse("n=1000"), so);
  for (int round = 0; round < 2; ++round)
    for (const std::optional<std::string> config :
         {std::optional<std::string>("wg=64,vec=1,ept=1"), std::optional<std::string>("wg=128,vec=4,ept=1"),
          std::optional<std::string>()}) {
      pd::forced_route f{"opencl", config};
      const auto r = pd::dispatch_call(q, call, &f);
      EXPECT_EQ(r.backend, "opencl");
      const kernel_config want = config ? desc.config.complete(kernel_config::parse(*config))
                                        : pd::tune_space_for(desc, q.get_device()).defaults;
      EXPECT_EQ(r.config, want.str()) << "forced " << config.value_or("(default)") << ", round " << round;
    }
}

// The host backend's copy path (GPUs) writes back the output's byte range only, at the view's
// offset: the output row lands in place and the rows around it keep their values.
TEST(Dispatch, HostCopyPathLeavesTheRestOfTheStorageAlone) {
  auto& q = test_queue();
  env_scope env(env_vars{});
  pd::testing::reload_config();
  pd::testing::host_backend_copies(true);
  tensor storage = tensor::from_floats(q, std::vector<float>(12, -7.f), {3, 4}, dtype::f32);
  tensor out = storage.slice(0, 1, 2);  // row 1 only: [1, 4]
  op_call c;
  c.op = "mm";
  c.inputs = {tensor::from_floats(q, std::vector<float>{1, 2}, {1, 2}, dtype::f32),
              tensor::from_floats(q, std::vector<float>{1, 0, 0, 1, 0, 1, 1, 0}, {2, 4}, dtype::f32)};
  c.outputs = {out};
  pd::forced_route f{"host", std::nullopt};
  auto r = pd::dispatch_call(q, c, &f);
  pd::testing::host_backend_copies(false);
  EXPECT_EQ(r.implementation, "host.openblas");
  EXPECT_EQ(storage.to_floats(q), (std::vector<float>{-7, -7, -7, -7, 1, 2, 2, 1, -7, -7, -7, -7}));
}

TEST(Dispatch, ClblastParametersApplyOnceAndRejectUnknownNames) {
  auto& q = test_queue();
  env_scope env(env_vars{});
  pd::testing::reload_config();
  auto defaults = pd::clblast::default_parameters(q.get_device(), dtype::f32);
  ASSERT_TRUE(defaults.find("KWG"));
  ASSERT_TRUE(defaults.find("XGEMM_MIN_INDIRECT_SIZE"));
  const auto& desc = op_registry::instance().get("mm");
  sample_options so;
  auto call = desc.sample(q, shape_key::parse("m=8,n=8,k=8"), so);
  auto before = pd::clblast::switching_statistics();
  // A direct-GEMM threshold above the size keeps the direct kernel; same set twice: one apply.
  auto params = pd::clblast::parse_parameters("XGEMM_MIN_INDIRECT_SIZE=4096");
  pd::clblast::run(q, desc.gemm(call), params).wait();
  pd::clblast::run(q, desc.gemm(call), params).wait();
  auto after = pd::clblast::switching_statistics();
  EXPECT_EQ(after.applied - before.applied, 1u);
  EXPECT_GE(after.skipped - before.skipped, 1u);
  std::string what;
  EXPECT_EQ(code_of([] { pd::clblast::parse_parameters("KWG=16,NOPE=3"); }, &what), errc::config_error);
  EXPECT_NE(what.find("XGEMM_MIN_INDIRECT_SIZE"), std::string::npos) << what;
  auto expected = compute_reference(q, desc, call);
  std::vector<host_tensor> got{read_host(q, call.outputs[0])};
  EXPECT_TRUE(compare_outputs(desc, call, expected, got).ok);
  pd::clblast::run(q, desc.gemm(call), {}).wait();  // back to CLBlast's defaults
}

// ---- shape-aware routes (issue 12 item 4) ------------------------------------------------------

namespace {
op_call mm_call(queue& q, std::int64_t m) {
  op_call c;
  c.op = "mm";
  c.inputs = {tensor::from_floats(q, std::vector<float>(m * 4, 1.f), {m, 4}, dtype::f32),
              tensor::from_floats(q, std::vector<float>(4 * 3, 2.f), {4, 3}, dtype::f32)};
  return c;
}
}  // namespace

// Conditions pick the backend per call shape; the log's origin names the entry's file:line.
TEST(Dispatch, ConditionalRoutesPickTheBackendPerShape) {
  auto& q = test_queue();
  temp_dir d;
  auto routes = d.write("routes.yaml",
                        "routes:\n"
                        "  mm:\n"
                        "    - {when: \"m <= 2\", backend: host}\n"
                        "    - {when: \"m >= 6 && n == 3\", backend: opencl}\n"
                        "  add: [{when: \"n > 100\", backend: host}]\n");
  d.write("vendors/acme/vendor.yaml", "name: acme\npriority: 100\nroutes:\n  mm: clblast\n");
  env_scope env(env_vars{{"PRISM_ROUTES", routes},
                         {"PRISM_VENDOR_PATH", (d.path / "vendors").string()},
                         {"PRISM_LOG_DISPATCH", "1"},
                         {"PRISM_LOG_DISPATCH_FILE", (d.path / "log.csv").string()}});
  pd::testing::reload_config();
  for (std::int64_t m : {1, 8, 4, 2}) {
    auto c = mm_call(q, m);
    auto r = pd::dispatch_call(q, c);
    auto out = c.outputs[0].to_floats(q);
    EXPECT_EQ(out, std::vector<float>(m * 3, 8.f)) << "m=" << m;
    (void)r;
  }
  dispatch_add(q);
  std::stringstream log(d.read("log.csv"));
  auto recs = pd::parse_log(log);
  std::vector<std::string> mm_lines;
  for (const auto& rec : recs)
    if (rec.event == "exec" && rec.op == "mm")
      mm_lines.push_back(rec.shape + " " + rec.backend + " " + rec.tier + " " + rec.reason);
  ASSERT_EQ(mm_lines.size(), 4u) << d.read("log.csv");
  EXPECT_EQ(mm_lines[0].rfind("m=1,n=3,k=4,ta=0,tb=0 host routes " + routes + ":3", 0), 0u) << mm_lines[0];
  EXPECT_EQ(mm_lines[1].rfind("m=8,n=3,k=4,ta=0,tb=0 opencl routes " + routes + ":4", 0), 0u) << mm_lines[1];
  // No condition holds and the list has no fallback: the vendor profile routes the call.
  EXPECT_NE(mm_lines[2].find("acme/vendor.yaml:4"), std::string::npos) << mm_lines[2];
  EXPECT_EQ(mm_lines[3].rfind("m=2,n=3,k=4,ta=0,tb=0 host routes " + routes + ":3", 0), 0u) << mm_lines[3];
  const auto add = std::find_if(recs.begin(), recs.end(), [](const auto& r) { return r.op == "add"; });
  ASSERT_NE(add, recs.end());
  EXPECT_EQ(add->backend, "opencl") << "n=4 takes no condition: the built-in order";
  EXPECT_EQ(add->tier, "default");

  // `prism routes` data: the conditions in order, with their origins.
  auto table = pd::effective_routes(q.get_device());
  auto mm = std::find_if(table.begin(), table.end(), [](const auto& e) { return e.op == "mm"; });
  ASSERT_NE(mm, table.end());
  ASSERT_EQ(mm->cases.size(), 2u);
  EXPECT_EQ(mm->cases[0].when, "m <= 2");
  EXPECT_EQ(mm->cases[0].backend, "host");
  EXPECT_EQ(mm->cases[1].origin, routes + ":4");
  EXPECT_EQ(mm->backend, "clblast");
  EXPECT_EQ(mm->tier, pd::source_tier::vendor);
}

// `esize` (bytes per element of the call's first output) routes 16-bit calls apart from f32 ones.
TEST(Dispatch, ConditionalRoutesReadTheOutputsElementSize) {
  auto& q = test_queue();
  temp_dir d;
  auto routes = d.write("routes.yaml",
                        "routes:\n"
                        "  add:\n"
                        "    - {when: \"esize == 2 && n >= 4\", backend: host}\n"
                        "    - {when: \"esize >= 4\", backend: opencl, config: \"wg=64,vec=1,ept=1\"}\n");
  env_scope env(env_vars{{"PRISM_ROUTES", routes}});
  pd::testing::reload_config();
  auto call = [&](dtype t) {
    op_call c;
    c.op = "add";
    const std::vector<float> a{1, 2, 3, 4}, b{10, 20, 30, 40};
    c.inputs = {tensor::from_floats(q, a, {4}, t), tensor::from_floats(q, b, {4}, t)};
    c.attrs = {{"alpha", 1.0}};
    auto r = pd::dispatch_call(q, c);
    EXPECT_EQ(c.outputs[0].to_floats(q), (std::vector<float>{11, 22, 33, 44})) << dtype_name(t);
    return r;
  };
  const auto f32 = call(dtype::f32);
  EXPECT_EQ(f32.backend, "opencl");
  EXPECT_EQ(f32.config, "wg=64,vec=1,ept=1");
  EXPECT_EQ(f32.reason, routes + ":4");
  for (dtype t : {dtype::f16, dtype::bf16}) {
    const auto half = call(t);
    EXPECT_EQ(half.backend, "host") << dtype_name(t);
    EXPECT_EQ(half.reason, routes + ":3") << dtype_name(t);
  }
  // A key component, esize and qbits are valid names; a misspelt one lists them.
  auto bad = d.write("bad.yaml", "routes:\n  add: [{when: \"bytes == 2\", backend: host}]\n");
  env_scope env2(env_vars{{"PRISM_ROUTES", bad}});
  std::string what;
  EXPECT_EQ(code_of([&] { pd::testing::reload_config(); }, &what), errc::config_error);
  EXPECT_NE(what.find("and esize"), std::string::npos) << what;
  EXPECT_NE(what.find("qbits"), std::string::npos) << what;
}

// `qbits` (bits per weight value of a block-quantized input, 0 without one) routes weight-only
// quantized calls apart from float ones: q8_0 (8) and q4_0 (4) weights each to their own entry.
TEST(Dispatch, ConditionalRoutesReadTheQuantizedWeightsBits) {
  auto& q = test_queue();
  temp_dir d;
  auto routes =
      d.write("routes.yaml",
              "routes:\n"
              "  linear:\n"
              "    - {when: \"qbits == 8\", backend: host}\n"
              "    - {when: \"qbits == 4 && m == 1\", backend: opencl, config: \"variant=0,qrn=2,qwg=1\"}\n"
              "    - {backend: opencl}\n");
  env_scope env(env_vars{{"PRISM_ROUTES", routes}});
  pd::testing::reload_config();
  const op_descriptor& lin = op_registry::instance().get("linear");
  auto route = [&](dtype wt) {
    sample_options o;
    o.type = wt;
    op_call c = lin.sample(q, shape_key::parse("m=1,n=8,k=64"), o);
    return pd::dispatch_call(q, c);
  };
  const auto q8 = route(dtype::q8_0), q4 = route(dtype::q4_0), f32 = route(dtype::f32);
  EXPECT_EQ(q8.backend, "host");
  EXPECT_EQ(q8.reason, routes + ":3");
  EXPECT_EQ(q4.backend, "opencl");
  EXPECT_EQ(q4.reason, routes + ":4");
  EXPECT_NE(q4.config.find("qrn=2"), std::string::npos) << q4.config;
  EXPECT_EQ(f32.reason, routes + ":5");
}

// A routed config that no implementation of its backend takes for a call (here the tiled
// attention variant, which reads 4 head dims per load, at head_dim 6) falls back to that backend's
// default config, not to another backend; strict mode keeps the route exact.
TEST(Dispatch, RefusedRouteConfigFallsBackToTheBackendsDefault) {
  auto& q = test_queue();
  temp_dir d;
  auto routes = d.write(
      "routes.yaml",
      "routes:\n  scaled_dot_product_attention: {backend: opencl, config: \"variant=2,bq=32,bk=16\"}\n");
  const op_descriptor& desc = op_registry::instance().get("scaled_dot_product_attention");
  auto call = [&](std::int64_t dim) {
    sample_options o;
    op_call c = desc.sample(
        q, shape_key::parse("b=1,hq=2,hkv=1,lq=5,lk=9,causal=1,mask=0,d=" + std::to_string(dim)), o);
    return c;
  };
  {
    env_scope env(env_vars{{"PRISM_ROUTES", routes}});
    pd::testing::reload_config();
    op_call routed = call(8);
    auto r = pd::dispatch_call(q, routed);
    EXPECT_EQ(r.implementation, "opencl.tiled");
    EXPECT_EQ(r.tier, pd::source_tier::routes);
    op_call c = call(6);
    r = pd::dispatch_call(q, c);
    EXPECT_EQ(r.backend, "opencl");
    EXPECT_NE(r.implementation, "opencl.tiled");
    EXPECT_EQ(r.tier, pd::source_tier::fallback);
    EXPECT_EQ(r.config.find("variant=2"), std::string::npos) << r.config;  // the profile default
    EXPECT_NE(r.reason.find("opencl.tiled: head_dim 6 and value dim 6 must be multiples of 4"),
              std::string::npos)
        << r.reason;
    auto expected = compute_reference(q, desc, c);
    std::vector<host_tensor> got{read_host(q, c.outputs[0])};
    EXPECT_TRUE(compare_outputs(desc, c, expected, got).ok);
  }
  {
    env_scope env(env_vars{{"PRISM_ROUTES", routes}, {"PRISM_STRICT_ROUTES", "1"}});
    pd::testing::reload_config();
    op_call c = call(6);
    std::string what;
    EXPECT_EQ(code_of([&] { pd::dispatch_call(q, c); }, &what), errc::unsupported);
    EXPECT_NE(what.find("must be multiples of 4"), std::string::npos) << what;
  }
}

// An env route outranks the conditions; conditions with bad names or configs stop start-up.
TEST(Dispatch, ConditionalRoutesPrecedenceAndStartupErrors) {
  auto& q = test_queue();
  temp_dir d;
  auto routes =
      d.write("routes.yaml", "routes:\n  mm: [{when: \"m <= 2\", backend: host}, {backend: opencl}]\n");
  {
    env_scope env(env_vars{{"PRISM_ROUTES", routes}, {"PRISM_OP_mm", "clblast"}});
    pd::testing::reload_config();
    auto c = mm_call(q, 1);
    EXPECT_EQ(pd::dispatch_call(q, c).backend, "clblast");
  }
  {
    env_scope env(env_vars{{"PRISM_ROUTES", routes}});
    pd::testing::reload_config();
    auto small = mm_call(q, 1), large = mm_call(q, 5);
    EXPECT_EQ(pd::dispatch_call(q, small).backend, "host");
    auto r = pd::dispatch_call(q, large);
    EXPECT_EQ(r.backend, "opencl");
    EXPECT_EQ(r.reason, routes + ":2") << "the fallback entry's line";
  }
  std::string what;
  auto names = d.write("names.yaml", "routes:\n  mm:\n    - {when: \"rows <= 2\", backend: host}\n");
  {
    env_scope env(env_vars{{"PRISM_ROUTES", names}});
    EXPECT_EQ(code_of([] { pd::testing::reload_config(); }, &what), errc::config_error);
    EXPECT_NE(what.find(names + ":3"), std::string::npos) << what;
    EXPECT_NE(what.find("'rows <= 2' reads 'rows'"), std::string::npos) << what;
    EXPECT_NE(what.find("valid components: m, n, k, ta, tb"), std::string::npos) << what;
  }
  auto config = d.write("config.yaml",
                        "routes:\n  mm:\n    - {when: \"m <= 2\", backend: opencl, config: \"tile=3\"}\n");
  {
    env_scope env(env_vars{{"PRISM_ROUTES", config}});
    EXPECT_EQ(code_of([] { pd::testing::reload_config(); }, &what), errc::config_error);
    EXPECT_NE(what.find(config + ":3"), std::string::npos) << what;
    EXPECT_NE(what.find("tile"), std::string::npos) << what;
  }
  d.write("vendors/acme/vendor.yaml",
          "name: acme\npriority: 100\nroutes:\n  linear:\n    - {when: \"b > 1\", backend: host}\n");
  {
    env_scope env(env_vars{{"PRISM_VENDOR_PATH", (d.path / "vendors").string()}});
    EXPECT_EQ(code_of([] { pd::testing::reload_config(); }, &what), errc::config_error);
    EXPECT_NE(what.find("acme/vendor.yaml:5"), std::string::npos) << what;
    EXPECT_NE(what.find("valid components: m, n, k"), std::string::npos) << what;
  }
}

// Every op declares the components its key produces (what conditions are checked against).
TEST(Dispatch, EveryOpDeclaresItsKeyNames) {
  auto& q = test_queue();
  for (const auto* d : op_registry::instance().all()) {
    SCOPED_TRACE(d->name);
    if (!d->key || !d->test_cases) continue;
    auto cases = d->test_cases(dtype::f32);
    if (cases.empty()) continue;
    std::vector<std::string> got, declared = d->key_names;
    auto c = cases.front().make(q, sample_options{});
    const shape_key key = d->key(c);
    for (const auto& [n, v] : key.components()) got.push_back(n);
    std::sort(got.begin(), got.end());
    std::sort(declared.begin(), declared.end());
    EXPECT_EQ(got, declared);
  }
}

// OpenBLAS on a CPU model it does not know runs its SSE3 (Prescott) kernels: the host backend says
// so once, with the OPENBLAS_CORETYPE that gives it the CPU's vector kernels.
TEST(HostBackend, AdvisesACoreTypeWhenOpenblasRunsOldKernels) {
  EXPECT_FALSE(pd::blas_core_advice("SkylakeX", true, true));
  EXPECT_FALSE(pd::blas_core_advice("Haswell", true, false));
  EXPECT_FALSE(pd::blas_core_advice("ZEN", true, true));
  EXPECT_FALSE(pd::blas_core_advice("Prescott", false, false));  // nothing better to pick
  const auto spr = pd::blas_core_advice("Prescott", true, true);
  ASSERT_TRUE(spr);
  EXPECT_NE(spr->find("'Prescott'"), std::string::npos) << *spr;
  EXPECT_NE(spr->find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << *spr;
  const auto avx2 = pd::blas_core_advice("Nehalem", true, false);
  ASSERT_TRUE(avx2);
  EXPECT_NE(avx2->find("OPENBLAS_CORETYPE=Haswell"), std::string::npos) << *avx2;
  const auto unknown = pd::blas_core_advice("", true, true);
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->find("'unknown'"), std::string::npos) << *unknown;
}
