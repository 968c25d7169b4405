// SPDX-License-Identifier: Apache-2.0
// Unit tests of the dispatcher's configuration layer: env parsing, routes files (includes,
// errors with file:line), vendor profiles (match, priority, override), routing precedence and
// name validation. No OpenCL device needed.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "dispatch/backends/backend.hpp"
#include "dispatch/config/env_settings.hpp"
#include "dispatch/config/route_condition.hpp"
#include "dispatch/config/routes_file.hpp"
#include "dispatch/config/routing.hpp"
#include "dispatch/config/vendor_profile.hpp"
#include "dispatch/log/dispatch_log.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/error.hpp"
#include "tests/dispatch/test_support.hpp"

namespace fs = std::filesystem;
using namespace prism;
using prism::test::code_of;
using namespace prism::dispatch;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() /
           ("prism_dispatch_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::string write(const std::string& name, const std::string& text) const {
    auto p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
};

const std::vector<op_catalog_entry> catalog = {
    {"add", {"opencl", "host"}, {"binary.cl"}},
    {"gelu.tanh", {"opencl", "host"}, {"unary.cl"}},
    {"mm", {"opencl", "clblast", "host"}, {"gemm.cl"}},
    {"softmax", {"opencl", "host"}, {"softmax.cl"}},
};
const std::vector<std::string> backends = {"opencl", "clblast", "host"};

const op_catalog_entry& op(const std::string& name) {
  for (const auto& e : catalog)
    if (e.name == name) return e;
  throw std::runtime_error("no op " + name);
}

}  // namespace

TEST(DispatchEnv, ParsesEveryVariable) {
  auto s = parse_env({{"PRISM_OP_mm", "CLBlast"},
                      {"PRISM_OP_gelu__tanh", "host"},
                      {"PRISM_UNUSED", "softmax, add"},
                      {"PRISM_ROUTES", "/x/r.yaml"},
                      {"PRISM_STRICT_ROUTES", "1"},
                      {"PRISM_LOG_DISPATCH", "profile,dispatch"},
                      {"PRISM_LOG_DISPATCH_FILE", "/tmp/l.csv"},
                      {"PRISM_LOG_DISPATCH_FILTER", "op=mm|,mm,"},
                      {"PRISM_VENDOR", "PoCL"},
                      {"PRISM_VENDOR_PATH", "/a:/b"},
                      {"PRISM_OTHER", "x"}});
  ASSERT_EQ(s.routes.size(), 2u);
  EXPECT_EQ(s.routes[0].op, "gelu.tanh");
  EXPECT_EQ(s.routes[0].backend, "host");
  EXPECT_EQ(s.routes[0].variable, "PRISM_OP_gelu__tanh");
  EXPECT_EQ(s.routes[1].op, "mm");
  EXPECT_EQ(s.routes[1].backend, "clblast");
  EXPECT_EQ(s.unused, (std::vector<std::string>{"softmax", "add"}));
  EXPECT_EQ(s.routes_file, "/x/r.yaml");
  EXPECT_TRUE(s.strict);
  EXPECT_TRUE(s.log.enabled && s.log.profile && s.log.candidates);
  EXPECT_EQ(s.log.file, "/tmp/l.csv");
  EXPECT_EQ(s.vendor, "pocl");
  EXPECT_EQ(s.vendor_path, (std::vector<std::string>{"/a", "/b"}));
  ASSERT_EQ(s.unknown.size(), 1u);
  EXPECT_NE(s.unknown[0].find("PRISM_OTHER is not a variable prism reads"), std::string::npos)
      << s.unknown[0];
}

// A misspelt variable is named, with the closest real one; variables other layers read are known.
TEST(DispatchEnv, UnknownNamesAreReportedWithASuggestion) {
  auto s = parse_env({{"PRISM_LOG_DISPATH", "1"},
                      {"PRISM_TUNNING_DB", "/x.db"},
                      {"PRISM_DEVICE", "pocl"},
                      {"PRISM_TUNING_DB", "/y.db"},
                      {"PRISM_RECORD_UNTUNED", "/s.yaml"},
                      {"PRISM_OPS_ALL_VENDORS", "1"},  // the op suite's, which now builds dispatch state
                      {"PRISM_PYTHON", "/venv/bin/python"},    // scripts/test.sh exports it to every test
                      {"PRISM_CL_OPTIONS", "-cl-nv-verbose"},  // the runtime's program builds read it
                      {"PRISM_LOG_LEVEL", "info"}});
  ASSERT_EQ(s.unknown.size(), 2u);
  EXPECT_NE(s.unknown[0].find("PRISM_LOG_DISPATH is not a variable prism reads; ignored (did you mean "
                              "PRISM_LOG_DISPATCH?)"),
            std::string::npos)
      << s.unknown[0];
  EXPECT_NE(s.unknown[1].find("(did you mean PRISM_TUNING_DB?)"), std::string::npos) << s.unknown[1];
  EXPECT_FALSE(s.log.enabled);
}

TEST(DispatchEnv, LogModes) {
  EXPECT_FALSE(parse_env({{"PRISM_LOG_DISPATCH", "0"}}).log.enabled);
  auto on = parse_env({{"PRISM_LOG_DISPATCH", "1"}}).log;
  EXPECT_TRUE(on.enabled);
  EXPECT_FALSE(on.profile || on.candidates);
  auto d = parse_env({{"PRISM_LOG_DISPATCH", "dispatch"}}).log;
  EXPECT_TRUE(d.enabled && d.candidates && !d.profile);
}

TEST(DispatchEnv, BadValuesNameTheVariableAndValidValues) {
  std::string what;
  EXPECT_EQ(code_of([] { parse_env({{"PRISM_LOG_DISPATCH", "loud"}}); }, &what), errc::config_error);
  EXPECT_NE(what.find("PRISM_LOG_DISPATCH"), std::string::npos);
  EXPECT_NE(what.find("profile"), std::string::npos);
  EXPECT_EQ(code_of([] { parse_env({{"PRISM_STRICT_ROUTES", "maybe"}}); }), errc::config_error);
  EXPECT_EQ(code_of([] { parse_env({{"PRISM_LOG_DISPATCH_FILTER", "(unclosed"}}); }), errc::config_error);
  EXPECT_EQ(code_of([] { parse_env({{"PRISM_OP_mm", ""}}); }), errc::config_error);
}

TEST(DispatchRoutesFile, IncludesLaterEntriesWin) {
  temp_dir d;
  d.write("base.yaml", "routes:\n  mm: clblast\n  add: host\nunused: [softmax]\n");
  auto top = d.write("sub/top.yaml",
                     "include: ../base.yaml\nroutes:\n  add: opencl\n  softmax: opencl\n"
                     "  mm: {backend: opencl, config: \"bm=4,bn=4\"}\n");
  auto r = load_routes_file(top);
  ASSERT_EQ(r.routes.size(), 3u);
  EXPECT_EQ(r.routes.at("add").backend, "opencl");
  EXPECT_EQ(r.routes.at("add").origin, top + ":3");
  EXPECT_EQ(r.routes.at("mm").backend, "opencl");
  EXPECT_EQ(r.routes.at("mm").config, "bm=4,bn=4");
  EXPECT_EQ(r.routes.at("softmax").backend, "opencl");
  EXPECT_TRUE(r.unused.empty()) << "softmax routed by the including file leaves unused";
}

TEST(DispatchRoutesFile, UnusedOverridesIncludedRoute) {
  temp_dir d;
  d.write("a.yaml", "routes: {add: opencl}\n");
  auto b = d.write("b.yaml", "include: [a.yaml]\nunused: [add]\n");
  auto r = load_routes_file(b);
  EXPECT_TRUE(r.routes.empty());
  ASSERT_EQ(r.unused.count("add"), 1u);
  EXPECT_EQ(r.unused.at("add"), b + ":2");
}

TEST(DispatchRoutesFile, ErrorsNameFileAndLine) {
  temp_dir d;
  std::string what;
  auto bad = d.write("bad.yaml", "routes:\n  mm: clblast\n  add: [unclosed\n");
  EXPECT_EQ(code_of([&] { load_routes_file(bad); }, &what), errc::config_error);
  EXPECT_NE(what.find(bad + ":"), std::string::npos) << what;
  EXPECT_NE(what.find("malformed YAML"), std::string::npos) << what;

  auto key = d.write("key.yaml", "route:\n  mm: clblast\n");
  EXPECT_EQ(code_of([&] { load_routes_file(key); }, &what), errc::config_error);
  EXPECT_NE(what.find(key + ":1"), std::string::npos) << what;
  EXPECT_NE(what.find("valid keys: routes, unused, include"), std::string::npos) << what;

  auto cyc = d.write("cyc.yaml", "include: cyc.yaml\n");
  EXPECT_EQ(code_of([&] { load_routes_file(cyc); }, &what), errc::config_error);
  EXPECT_NE(what.find("cycle"), std::string::npos);

  EXPECT_EQ(code_of([&] { load_routes_file((d.path / "missing.yaml").string()); }), errc::io_error);
}

// Hostile routes files are bounded and located (issue 15).
TEST(DispatchRoutesFile, IncludeTreeIsParsedOncePerFile) {
  temp_dir d;
  // 22 levels, each including the next level twice: 2^22 paths through 23 files.
  for (int level = 0; level < 22; ++level)
    d.write("l" + std::to_string(level) + ".yaml",
            "include: [l" + std::to_string(level + 1) + ".yaml, l" + std::to_string(level + 1) + ".yaml]\n");
  d.write("l22.yaml", "routes: {add: host}\n");
  std::string what;
  // Deeper than the include depth limit: a clear error, at once.
  EXPECT_EQ(code_of([&] { load_routes_file((d.path / "l0.yaml").string()); }, &what), errc::config_error);
  EXPECT_NE(what.find("nested more than 16 levels"), std::string::npos) << what;
  // Within it, a diamond-shaped tree is read once per file.
  auto r = load_routes_file((d.path / "l8.yaml").string());
  EXPECT_EQ(r.routes.at("add").backend, "host");
}

TEST(DispatchRoutesFile, OnlyBoundedRegularFilesAreRead) {
  temp_dir d;
  std::string what;
  EXPECT_EQ(code_of([&] { load_routes_file("/dev/zero"); }, &what), errc::io_error);
  EXPECT_NE(what.find("not a regular file"), std::string::npos) << what;
  EXPECT_EQ(code_of([&] { load_routes_file(d.path.string()); }, &what), errc::io_error);
  EXPECT_NE(what.find("a directory"), std::string::npos) << what;
  fs::create_directories(d.path / "inc.yaml");
  auto top = d.write("top.yaml", "routes: {add: host}\ninclude: inc.yaml\n");
  EXPECT_EQ(code_of([&] { load_routes_file(top); }, &what), errc::io_error);
  EXPECT_NE(what.find(top + ":2: include"), std::string::npos) << what;
  EXPECT_NE(what.find("a directory"), std::string::npos) << what;
  auto big = d.write("big.yaml", "# " + std::string(2u << 20, 'x') + "\n");
  EXPECT_EQ(code_of([&] { load_routes_file(big); }, &what), errc::config_error);
  EXPECT_NE(what.find("at most 1048576 bytes"), std::string::npos) << what;
  // An alias bomb: 9 levels of 10 aliases each would be 10^9 nodes.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) bomb += (j ? ", *a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  auto aliases = d.write("bomb.yaml", bomb + "routes: {add: host}\n");
  EXPECT_EQ(code_of([&] { load_routes_file(aliases); }, &what), errc::config_error);
  EXPECT_NE(what.find("more than 100000 YAML nodes"), std::string::npos) << what;
}

TEST(DispatchRoutesFile, RouteWithoutBackendNamesFileLineAndOp) {
  temp_dir d;
  std::string what;
  auto f = d.write("r.yaml", "routes:\n  add: host\n  mm: {config: \"bm=4\"}\n");
  EXPECT_EQ(code_of([&] { load_routes_file(f); }, &what), errc::config_error);
  EXPECT_NE(what.find(f + ":3: route 'mm' has no 'backend: <name>'"), std::string::npos) << what;
  auto k = d.write("k.yaml", "routes: {add: host}\n[a, b]: x\n");
  EXPECT_EQ(code_of([&] { load_routes_file(k); }, &what), errc::config_error);
  EXPECT_NE(what.find(k + ":2"), std::string::npos) << what;
}

TEST(DispatchEnv, DispatchFilterPatternIsBounded) {
  std::string what;
  EXPECT_EQ(
      code_of(
          [] {
            parse_env({{"PRISM_LOG_DISPATCH_FILTER", std::string(20000, '(') + std::string(20000, ')')}});
          },
          &what),
      errc::config_error);
  EXPECT_NE(what.find("at most 256 are allowed"), std::string::npos) << what;
  EXPECT_EQ(
      code_of(
          [] {
            parse_env({{"PRISM_LOG_DISPATCH_FILTER", std::string(40, '(') + "a" + std::string(40, ')')}});
          },
          &what),
      errc::config_error);
  EXPECT_NE(what.find("nests groups 40 deep"), std::string::npos) << what;
  EXPECT_EQ(parse_env({{"PRISM_LOG_DISPATCH_FILTER", "op=(mm|add)\\("}}).log.filter, "op=(mm|add)\\(");
}

TEST(DispatchVendor, MatchPriorityAndOverrideByPath) {
  temp_dir shipped, extra;
  shipped.write("generic/vendor.yaml", "name: generic\npriority: 0\n");
  shipped.write("pocl/vendor.yaml",
                "name: pocl\npriority: 10\nmatch:\n  platform_name: ['*portable computing*', '*pocl*']\n"
                "routes:\n  mm: opencl\nunused: [softmax]\n");
  extra.write("acme/vendor.yaml",
              "name: acme\npriority: 20\nmatch:\n  device_vendor: acme*\n  device_type: [gpu]\n"
              "routes: {mm: clblast}\n");
  extra.write("acme/kernels/binary.cl", "__kernel void k() {}\n");
  auto profiles = load_vendor_profiles({shipped.path.string(), extra.path.string()});
  ASSERT_EQ(profiles.size(), 3u);

  device_description cpu{"Portable Computing Language", "GenuineIntel", "cpu", "cpu-haswell"};
  device_description acme_gpu{"ACME CL", "ACME Inc.", "gpu", "Rocket 9"};
  device_description acme_cpu{"ACME CL", "ACME Inc.", "cpu", "Rocket 9"};
  EXPECT_EQ(select_vendor(profiles, cpu, "")->name, "pocl");
  EXPECT_EQ(select_vendor(profiles, acme_gpu, "")->name, "acme");
  EXPECT_EQ(select_vendor(profiles, acme_cpu, "")->name, "generic");
  EXPECT_EQ(select_vendor(profiles, cpu, "acme")->name, "acme");
  std::string what;
  EXPECT_EQ(code_of([&] { select_vendor(profiles, cpu, "nope"); }, &what), errc::not_found);
  EXPECT_NE(what.find("generic, pocl, acme"), std::string::npos) << what;

  const auto& acme = *select_vendor(profiles, acme_gpu, "");
  // The loader reads the override texts once, with the profile.
  ASSERT_TRUE(acme.kernels.count("binary.cl"));
  EXPECT_NE(acme.kernels.at("binary.cl").text.find("__kernel"), std::string::npos);
  EXPECT_FALSE(acme.kernels.count("unary.cl"));
  EXPECT_EQ(acme.match_summary(), "device_type=gpu; device_vendor=acme*");

  // A same-named profile later in the path replaces the shipped one.
  temp_dir patch;
  patch.write("pocl/vendor.yaml", "name: pocl\npriority: 10\nroutes: {mm: host}\n");
  auto patched = load_vendor_profiles({shipped.path.string(), patch.path.string()});
  EXPECT_EQ(select_vendor(patched, cpu, "")->routes.at("mm").backend, "host");
}

TEST(DispatchVendor, MalformedProfiles) {
  temp_dir d;
  std::string what;
  d.write("a/vendor.yaml", "name: a\nmatch:\n  gpu_name: x\n");
  EXPECT_EQ(code_of([&] { load_vendor_profiles({d.path.string()}); }, &what), errc::config_error);
  EXPECT_NE(what.find("vendor.yaml:3"), std::string::npos) << what;
  EXPECT_NE(what.find("device_name"), std::string::npos) << what;
  temp_dir e;
  e.write("b/vendor.yaml", "name: b\nroutes: {mm: opencl\n");
  EXPECT_EQ(code_of([&] { load_vendor_profiles({e.path.string()}); }, &what), errc::config_error);
  EXPECT_NE(what.find("malformed YAML"), std::string::npos) << what;
  temp_dir f;
  f.write("c/vendor.yaml", "name: other\n");
  EXPECT_EQ(code_of([&] { load_vendor_profiles({f.path.string()}); }), errc::config_error);
  // A key yaml-cpp cannot read as text (a map as a key) names the file and line, not "bad conversion".
  temp_dir g;
  g.write("k/vendor.yaml", "name: k\nmatch:\n  ? {a: 1}\n  : x\n");
  EXPECT_EQ(code_of([&] { load_vendor_profiles({g.path.string()}); }, &what), errc::config_error);
  EXPECT_NE(what.find("k/vendor.yaml:3"), std::string::npos) << what;
  EXPECT_EQ(what.find("bad conversion"), std::string::npos) << what;
  // tune_configs.yaml is read with the profile, at start-up: a broken one stops the load, named.
  temp_dir h;
  h.write("t/vendor.yaml", "name: t\n");
  h.write("t/tune_configs.yaml", "ops:\n  - op: exp\n    default: {vec: 3}\n");
  EXPECT_EQ(code_of([&] { load_vendor_profiles({h.path.string()}); }, &what), errc::config_error);
  EXPECT_NE(what.find("t/tune_configs.yaml"), std::string::npos) << what;
}

TEST(DispatchVendor, GlobMatch) {
  EXPECT_TRUE(glob_match("*pocl*", "Portable Computing Language (PoCL)"));
  EXPECT_TRUE(glob_match("nvidia*", "NVIDIA Corporation"));
  EXPECT_TRUE(glob_match("cpu-?aswell", "cpu-haswell"));
  EXPECT_FALSE(glob_match("gpu", "cpu"));
  EXPECT_TRUE(glob_match("*", ""));
}

// Every combination of the four configured sources (env route, routes file, vendor, built-in)
// resolves to the highest one present, and says so.
TEST(DispatchRouting, EveryPrecedenceCombination) {
  vendor_profile vendor;
  vendor.name = "v";
  vendor.routes["mm"] = {"host", "", "vendor.yaml:3"};
  routes_config routes;
  routes.routes["mm"] = {"clblast", "", "routes.yaml:2"};
  env_settings env;
  env.routes.push_back({"mm", "opencl", "PRISM_OP_mm"});
  env_settings no_env;
  for (int mask = 0; mask < 8; ++mask) {
    routing_sources src;
    src.env = (mask & 4) ? &env : &no_env;
    src.routes = (mask & 2) ? &routes : nullptr;
    src.vendor = (mask & 1) ? &vendor : nullptr;
    auto r = resolve_route(op("mm"), src);
    SCOPED_TRACE("mask " + std::to_string(mask));
    if (mask & 4) {
      EXPECT_EQ(r.backend, "opencl");
      EXPECT_EQ(r.tier, source_tier::env);
      EXPECT_EQ(r.origin, "PRISM_OP_mm");
      EXPECT_TRUE(r.above_db());
    } else if (mask & 2) {
      EXPECT_EQ(r.backend, "clblast");
      EXPECT_EQ(r.tier, source_tier::routes);
      EXPECT_EQ(r.origin, "routes.yaml:2");
      EXPECT_TRUE(r.above_db());
    } else if (mask & 1) {
      EXPECT_EQ(r.backend, "host");
      EXPECT_EQ(r.tier, source_tier::vendor);
      EXPECT_FALSE(r.above_db());
    } else {
      EXPECT_EQ(r.backend, "opencl");
      EXPECT_EQ(r.tier, source_tier::default_order);
      EXPECT_EQ(r.origin, "built-in");
    }
  }
}

TEST(DispatchRouting, UnusedAtEachLevel) {
  env_settings env;
  env.unused = {"softmax"};
  routing_sources src{&env, nullptr, nullptr};
  auto r = resolve_route(op("softmax"), src);
  EXPECT_TRUE(r.unused);
  EXPECT_EQ(r.backend, "host");
  EXPECT_EQ(r.tier, source_tier::env);
  EXPECT_EQ(r.origin, "PRISM_UNUSED");
  // An explicit PRISM_OP_ beats PRISM_UNUSED for the same op.
  env.routes.push_back({"softmax", "opencl", "PRISM_OP_softmax"});
  EXPECT_EQ(resolve_route(op("softmax"), src).backend, "opencl");

  env_settings none;
  routes_config rc;
  rc.unused["add"] = "r.yaml:1";
  vendor_profile v;
  v.unused["add"] = "v.yaml:1";
  v.routes["softmax"] = {"host", "", "v.yaml:2"};
  routing_sources src2{&none, &rc, &v};
  auto a = resolve_route(op("add"), src2);
  EXPECT_TRUE(a.unused);
  EXPECT_EQ(a.tier, source_tier::routes);
  routing_sources src3{&none, nullptr, &v};
  auto b = resolve_route(op("add"), src3);
  EXPECT_TRUE(b.unused);
  EXPECT_EQ(b.tier, source_tier::vendor);
  // An op no file names is still routable by env (env override of any op).
  env_settings only_env;
  only_env.routes.push_back({"gelu.tanh", "host", "PRISM_OP_gelu__tanh"});
  routing_sources src4{&only_env, &rc, &v};
  auto g = resolve_route(op("gelu.tanh"), src4);
  EXPECT_EQ(g.backend, "host");
  EXPECT_EQ(g.tier, source_tier::env);
}

TEST(DispatchRouting, CandidateOrder) {
  EXPECT_EQ(candidate_order(op("mm"), "clblast"), (std::vector<std::string>{"clblast", "opencl", "host"}));
  EXPECT_EQ(candidate_order(op("mm"), "host"), (std::vector<std::string>{"host", "opencl", "clblast"}));
}

TEST(DispatchRouting, ValidationListsValidNames) {
  std::string what;
  env_settings env;
  env.routes.push_back({"matmull", "opencl", "PRISM_OP_matmull"});
  EXPECT_EQ(code_of([&] { validate_sources(catalog, backends, env, nullptr, {}); }, &what), errc::not_found);
  EXPECT_NE(what.find("PRISM_OP_matmull"), std::string::npos) << what;
  EXPECT_NE(what.find("valid ops: add, gelu.tanh, mm, softmax"), std::string::npos) << what;

  env.routes = {{"mm", "cublas", "PRISM_OP_mm"}};
  EXPECT_EQ(code_of([&] { validate_sources(catalog, backends, env, nullptr, {}); }, &what), errc::not_found);
  EXPECT_NE(what.find("valid backends: opencl, clblast, host"), std::string::npos) << what;

  env.routes = {{"add", "clblast", "PRISM_OP_add"}};
  EXPECT_EQ(code_of([&] { validate_sources(catalog, backends, env, nullptr, {}); }, &what), errc::not_found);
  EXPECT_NE(what.find("does not implement"), std::string::npos) << what;

  env.routes.clear();
  env.unused = {"nosuch"};
  EXPECT_EQ(code_of([&] { validate_sources(catalog, backends, env, nullptr, {}); }), errc::not_found);

  env_settings ok;
  routes_config rc;
  rc.routes["mm"] = {"gpu", "", "r.yaml:7"};
  EXPECT_EQ(code_of([&] { validate_sources(catalog, backends, ok, &rc, {}); }, &what), errc::not_found);
  EXPECT_NE(what.find("r.yaml:7"), std::string::npos) << what;

  vendor_profile v;
  v.kernels["gemmm.cl"] = {"/v/kernels/gemmm.cl", "__kernel void k() {}"};
  EXPECT_EQ(code_of([&] { validate_sources(catalog, backends, ok, nullptr, {v}); }, &what), errc::not_found);
  EXPECT_NE(what.find("binary.cl, gemm.cl, softmax.cl, unary.cl"), std::string::npos) << what;

  EXPECT_NO_THROW(validate_sources(catalog, backends, ok, nullptr, {}));
}

TEST(DispatchLog, LinesParseBack) {
  log_record a;
  a.op = "mm";
  a.dtypes = "f32|f32";
  a.shape = "m=128,n=64,k=32";
  a.device = "0123456789abcdef";
  a.backend = "opencl";
  a.config = "bm=4,bn=4";
  a.tier = "fallback";
  a.reason = "clblast: bf16 not supported, says \"x\"";
  a.time_us = 12.5;
  a.attrs = "alpha=1.0;dims=[0,2]";
  a.timestamp = log_timestamp();
  a.pid = 4242;
  a.implementation = "opencl.gemm.tiled";
  a.borrowed_shape = "m=128,n=64,k=64";
  a.compile_us = 900.25;
  log_record b;
  b.event = "reject";
  b.op = "add";
  b.backend = "clblast";
  std::stringstream s;
  s << "unrelated line\n" << log_header() << "\n" << format_log_line(a) << "\n" << format_log_line(b) << "\n";
  auto recs = parse_log(s);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].shape, a.shape);
  EXPECT_EQ(recs[0].config, a.config);
  EXPECT_EQ(recs[0].reason, a.reason);
  EXPECT_EQ(recs[0].attrs, a.attrs);
  ASSERT_TRUE(recs[0].time_us);
  EXPECT_DOUBLE_EQ(*recs[0].time_us, 12.5);
  EXPECT_EQ(recs[1].event, "reject");
  EXPECT_FALSE(recs[1].time_us);
  EXPECT_EQ(recs[0].timestamp, a.timestamp);
  EXPECT_TRUE(std::regex_match(a.timestamp, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z)")))
      << a.timestamp;
  EXPECT_EQ(recs[0].pid, 4242);
  EXPECT_EQ(recs[0].implementation, a.implementation);
  EXPECT_EQ(recs[0].borrowed_shape, a.borrowed_shape);
  ASSERT_TRUE(recs[0].compile_us);
  EXPECT_DOUBLE_EQ(*recs[0].compile_us, 900.25);
  EXPECT_FALSE(recs[1].compile_us);
  // One line without its header, as `prism run --replay` and `prism log replay` take it.
  auto one = parse_log_line(format_log_line(a));
  EXPECT_EQ(one.shape, a.shape);
  EXPECT_EQ(one.borrowed_shape, a.borrowed_shape);
  EXPECT_EQ(one.version, "v2");
  EXPECT_EQ(code_of([] { parse_log_line("prism_dispatch,v2,exec,add"); }), errc::invalid_argument);
  EXPECT_EQ(code_of([] { parse_log_line("add,n=4"); }), errc::invalid_argument);
  EXPECT_EQ(log_header(),
            "prism_dispatch_header,v2,event,time,pid,op,dtypes,shape,device,backend,impl,config,tier,"
            "borrowed_shape,reason,time_us,compile_us,attrs");

  std::stringstream wrong("prism_dispatch_header,v9,event\n");
  EXPECT_EQ(code_of([&] { parse_log(wrong); }), errc::config_error);
}

// prism 0.1 wrote v1 logs; they still parse (with a header or line by line) and replay.
TEST(DispatchLog, VersionOneLinesStillParse) {
  const std::string v1_line =
      "prism_dispatch,v1,exec,addmm,f32|f32|f32,\"m=9,n=10,k=11\",0123,host,,default,built-in,3.500,"
      "alpha=0.5;beta=2.0";
  std::stringstream s(log_header("v1") + "\n" + v1_line + "\n");
  auto recs = parse_log(s);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].version, "v1");
  EXPECT_EQ(recs[0].op, "addmm");
  EXPECT_EQ(recs[0].shape, "m=9,n=10,k=11");
  EXPECT_EQ(recs[0].backend, "host");
  EXPECT_EQ(recs[0].attrs, "alpha=0.5;beta=2.0");
  EXPECT_EQ(recs[0].pid, 0);
  ASSERT_TRUE(recs[0].time_us);
  EXPECT_DOUBLE_EQ(*recs[0].time_us, 3.5);
  auto one = parse_log_line(v1_line);
  EXPECT_EQ(one.shape, recs[0].shape);
  EXPECT_EQ(one.attrs, recs[0].attrs);
  // A v2 line under a v1 header is refused, naming the line.
  std::stringstream mixed(log_header("v1") + "\n" + format_log_line(recs[0]) + "\n");
  std::string what;
  EXPECT_EQ(code_of([&] { parse_log(mixed); }, &what), errc::config_error);
  EXPECT_NE(what.find("line 2"), std::string::npos) << what;
}

static std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(DispatchLog, HeaderEvenWhenTheFilterMatchesNothing) {
  temp_dir d;
  log_settings s;
  s.enabled = true;
  s.file = (d.path / "log.csv").string();
  s.filter = ",no_such_op,";
  {
    log_sink sink(s);
    log_record r;
    r.op = "add";
    sink.write(r);
  }
  EXPECT_EQ(read_file(s.file), log_header() + "\n");
}

TEST(DispatchLog, AppendsToAnExistingLogAndRefusesAnotherFormat) {
  temp_dir d;
  log_settings s;
  s.enabled = true;
  s.file = (d.path / "log.csv").string();
  for (int run = 0; run < 2; ++run) {
    log_sink sink(s);
    log_record r;
    r.op = run ? "mm" : "add";
    sink.write(r);
  }
  auto text = read_file(s.file);
  std::stringstream in(text);
  auto recs = parse_log(in);
  ASSERT_EQ(recs.size(), 2u) << text;
  EXPECT_EQ(recs[0].op, "add");
  EXPECT_EQ(recs[1].op, "mm");
  EXPECT_EQ(text.find(log_header(), 1), std::string::npos) << "one header only:\n" << text;

  std::ofstream(d.path / "old.csv") << log_header("v1") << "\n";
  s.file = (d.path / "old.csv").string();
  std::string what;
  EXPECT_EQ(code_of([&] { log_sink sink(s); }, &what), errc::config_error);
  EXPECT_NE(what.find("remove it or choose another file"), std::string::npos) << what;
  EXPECT_EQ(read_file(s.file), log_header("v1") + "\n");  // left as it was
}

// Eight processes append to one file at once: one header, every line whole and parseable.
TEST(DispatchLog, ManyProcessesAppendToOneFile) {
  temp_dir d;
  log_settings s;
  s.enabled = true;
  s.file = (d.path / "log.csv").string();
  constexpr int processes = 8, lines = 400;
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        log_sink sink(s);
        log_record r;
        r.op = "op" + std::to_string(p);
        r.pid = ::getpid();
        r.timestamp = log_timestamp();
        r.reason = std::string(300, 'x');  // long lines: more chance to tear, were writes split
        for (int i = 0; i < lines; ++i) {
          r.shape = "n=" + std::to_string(i);
          sink.write(r);
        }
      } catch (...) {
        status = 1;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t c : children) {
    int status = 0;
    ::waitpid(c, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto text = read_file(s.file);
  EXPECT_EQ(text.rfind(log_header() + "\n", 0), 0u);
  EXPECT_EQ(text.find(log_header(), 1), std::string::npos) << "more than one header";
  std::stringstream in(text);
  auto recs = parse_log(in);
  ASSERT_EQ(recs.size(), static_cast<std::size_t>(processes * lines));
  std::map<std::string, int> next;  // each process's lines arrive whole and in its order
  for (const auto& r : recs) {
    ASSERT_EQ(r.reason.size(), 300u);
    EXPECT_EQ(r.shape, "n=" + std::to_string(next[r.op]++));
  }
  EXPECT_EQ(next.size(), static_cast<std::size_t>(processes));
}

TEST(DispatchLog, SummarizeCountsExecLinesPerOpBackendAndTier) {
  std::vector<log_record> recs(5);
  recs[0].op = recs[1].op = recs[2].op = "mm";
  recs[0].backend = recs[1].backend = "opencl";
  recs[0].tier = recs[1].tier = "db-nearest";
  recs[0].time_us = 10;
  recs[1].time_us = 30;
  recs[1].compile_us = 1000;
  recs[0].pid = 1;
  recs[1].pid = 2;
  recs[2].event = "reject";
  recs[2].backend = "clblast";
  recs[3].op = "add";
  recs[3].backend = "host";
  recs[3].tier = "fallback";
  recs[4].event = "error";
  auto sum = summarize_log(recs);
  EXPECT_EQ(sum.lines, 5u);
  EXPECT_EQ(sum.exec, 2u + 1u);
  EXPECT_EQ(sum.rejects, 1u);
  EXPECT_EQ(sum.errors, 1u);
  EXPECT_EQ(sum.processes, 2u);
  EXPECT_TRUE(sum.with_time);
  EXPECT_DOUBLE_EQ(sum.compile_ms, 1.0);
  ASSERT_EQ(sum.stats.size(), 2u);
  EXPECT_EQ(sum.stats[0].op, "add");
  EXPECT_EQ(sum.stats[0].fallbacks, 1u);
  EXPECT_EQ(sum.stats[1].op, "mm");
  EXPECT_EQ(sum.stats[1].calls, 2u);
  EXPECT_EQ(sum.stats[1].time_ns, 40000u);  // compile time is not in it
  auto table = format_summary(sum.stats, sum.with_time);
  EXPECT_NE(table.find("tuning database hits: 2 of 3 calls"), std::string::npos) << table;
  recs[0].tier = "sideways";
  EXPECT_EQ(code_of([&] { summarize_log(recs); }), errc::config_error);
}

namespace {
// parse_log on `text` is a config_error whose message has `message`.
void expect_log_error(const std::string& text, const std::string& message) {
  std::stringstream bad(text);
  std::string what;
  EXPECT_EQ(code_of([&] { parse_log(bad); }, &what), errc::config_error) << text;
  EXPECT_NE(what.find(message), std::string::npos) << what;
}
}  // namespace

// Found by fuzz/dispatch_log: a bad time_us ended `prism run --replay` with "stod".
TEST(DispatchLog, BadTimeIsNamed) {
  for (const std::string t : {"x", "1e999", "nan", "-3"})
    expect_log_error(log_header("v1") +
                         "\nprism_dispatch,v1,exec,add,f32,n=4,0123456789abcdef,opencl,,default,," + t +
                         ",\n",
                     "field time_us is '" + t + "'; expected a finite number >= 0");
}

// Found by fuzz/dispatch_log (UBSan): a pid of 1e308 was converted to an integer out of range.
TEST(DispatchLog, BadPidIsNamed) {
  for (const std::string pid : {"1e308", "12.5", "-1", "99999999999999999999", "x"})
    expect_log_error(log_header() + "\nprism_dispatch,v2,exec,2026-11-24T05:00:00Z," + pid +
                         ",add,f32,n=4,0123456789abcdef,opencl,,,default,,,1.0,,\n",
                     "field pid is '" + pid + "'; expected a whole number >= 0");
  std::stringstream good(log_header() +
                         "\nprism_dispatch,v2,exec,2026-11-24T05:00:00Z,4242,add,f32,n=4,0123456789abcdef,"
                         "opencl,,,default,,,1.0,,\n");
  const auto recs = parse_log(good);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].pid, 4242);
}

TEST(DispatchLog, SinkFiltersAndWritesHeaderOnce) {
  temp_dir d;
  log_settings s;
  s.enabled = true;
  s.file = (d.path / "log.csv").string();
  s.filter = ",mm,";
  {
    log_sink sink(s);
    log_record r;
    r.op = "add";
    sink.write(r);
    r.op = "mm";
    sink.write(r);
    sink.write(r);
  }
  auto content = read_file(s.file);
  EXPECT_EQ(content.find(log_header()), 0u);
  std::stringstream again(content);
  auto recs = parse_log(again);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].op, "mm");
}

TEST(DispatchLog, SummaryTable) {
  using prism::dispatch::source_tier;
  auto t = format_summary({{"mm", "opencl", source_tier::fallback, 3, 3, 2500000},
                           {"mm", "opencl", source_tier::db_exact, 4, 0, 100000},
                           {"add", "host", source_tier::env, 7, 0, 0},
                           {"add", "opencl", source_tier::db_nearest, 2, 0, 0}},
                          true);
  EXPECT_NE(t.find("prism dispatch summary"), std::string::npos);
  EXPECT_NE(t.find("tier"), std::string::npos) << t;
  EXPECT_LT(t.find("\nadd "), t.find("\nmm "));
  // One row per (op, backend, tier), the tier named as in the dispatch log.
  EXPECT_TRUE(std::regex_search(t, std::regex("\nmm +opencl +db-exact +4 +0 +0\\.100\n"))) << t;
  EXPECT_TRUE(std::regex_search(t, std::regex("\nmm +opencl +fallback +3 +3 +2\\.500\n"))) << t;
  EXPECT_TRUE(std::regex_search(t, std::regex("\nadd +host +env +7 +0 "))) << t;
  EXPECT_NE(t.find("tuning database hits: 6 of 16 calls (38%; db-exact 4, db-nearest 2)"), std::string::npos)
      << t;
  EXPECT_EQ(format_summary({}, false).find("time_ms"), std::string::npos);
}

// A bad opencl config names the op's parameters once: appended to a syntax error or a bad value,
// and not again after an unknown name, whose reason lists them itself.
TEST(DispatchConfig, BadOpenclConfigNamesTheParametersOnce) {
  const auto& add = op_registry::instance().get("add");
  const auto& reader = backend_named("opencl", "test");
  auto message = [&](const std::string& text) {
    std::string what;
    EXPECT_EQ(code_of([&] { reader.read_config(add, text, vendor_context{}); }, &what), errc::config_error)
        << text;
    return what;
  };
  auto count = [](const std::string& s, const std::string& sub) {
    std::size_t n = 0;
    for (auto p = s.find(sub); p != std::string::npos; p = s.find(sub, p + 1)) ++n;
    return n;
  };
  const std::string syntax = message("vec8"), value = message("vec=3"), name = message("tile=3");
  EXPECT_EQ(count(syntax, "wg, vec, ept"), 1u) << syntax;
  EXPECT_NE(value.find("ops::add"), std::string::npos) << value;
  EXPECT_NE(value.find("'vec=3': parameter 'vec' = 3 is not one of"), std::string::npos) << value;
  EXPECT_EQ(count(value, "; parameters: wg, vec, ept"), 1u) << value;
  EXPECT_NE(name.find("unknown parameter 'tile' (valid: wg, vec, ept)"), std::string::npos) << name;
  EXPECT_EQ(count(name, "wg, vec, ept"), 1u) << name;
  EXPECT_EQ(reader.read_config(add, "vec=8", vendor_context{}).str(), "wg=256,vec=8,ept=1");
}

// ---- shape-aware routes (issue 12 item 4) ------------------------------------------------------

TEST(DispatchRouteCondition, ParsesComparisonsAndOperators) {
  const shape_key small{{"m", 8}, {"n", 4096}, {"k", 1024}};
  const shape_key big{{"m", 512}, {"n", 4096}, {"k", 1024}};
  auto holds = [](const std::string& text, const shape_key& key) {
    return route_condition::parse(text).holds(key);
  };
  EXPECT_TRUE(holds("m <= 16", small));
  EXPECT_FALSE(holds("m <= 16", big));
  EXPECT_TRUE(holds("m<16&&k>=1024", small));
  EXPECT_FALSE(holds("m < 16 && k > 1024", small));
  EXPECT_TRUE(holds("m > 256 || n == 4096", small));
  EXPECT_TRUE(holds("(m <= 16 || m >= 512) && n != 1", big));
  EXPECT_FALSE(holds("m == 8 && (n < 10 || k < 10)", small));
  EXPECT_TRUE(holds("n >= k", small));
  EXPECT_TRUE(holds("-1 < m", small));
  // && binds tighter than ||
  EXPECT_TRUE(holds("m == 1 && n == 1 || k == 1024", small));
  EXPECT_EQ(route_condition::parse("m <= 16 && (k > m || n > m)").names(),
            (std::vector<std::string>{"m", "k", "n"}));
}

TEST(DispatchRouteCondition, SyntaxErrorsNameTheTextAndColumn) {
  std::string what;
  for (const std::string bad : {"m <= ", "m << 16", "m <= 16 &&", "(m <= 16", "m <= 16)", "m * 2 < 3", "",
                                "m <= 16 & k > 2", "m <= 99999999999999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(code_of([&] { route_condition::parse(bad); }, &what), errc::config_error);
    EXPECT_NE(what.find("'" + bad + "'"), std::string::npos) << what;
    EXPECT_NE(what.find("column"), std::string::npos) << what;
  }
  // Bounded: length, comparisons and nesting.
  EXPECT_EQ(code_of([&] { route_condition::parse(std::string(600, ' ') + "m < 1"); }, &what),
            errc::config_error);
  EXPECT_NE(what.find("at most 512"), std::string::npos) << what;
  std::string many = "m < 1";
  for (int i = 0; i < 40; ++i) many += " || m < 1";
  EXPECT_EQ(code_of([&] { route_condition::parse(many); }, &what), errc::config_error);
  EXPECT_NE(what.find("more than 32 comparisons"), std::string::npos) << what;
  EXPECT_EQ(
      code_of([&] { route_condition::parse(std::string(40, '(') + "m < 1" + std::string(40, ')')); }, &what),
      errc::config_error);
  EXPECT_NE(what.find("nesting deeper than 16"), std::string::npos) << what;
}

TEST(DispatchRoutesFile, ConditionalListsParseWithOriginsAndFallback) {
  temp_dir d;
  auto file = d.write("r.yaml",
                      "routes:\n"
                      "  mm:\n"
                      "    - {when: \"m <= 16\", backend: opencl, config: \"variant=2\"}\n"
                      "    - {when: \"k > 4096 && n > 1\", backend: host}\n"
                      "    - {backend: clblast}\n"
                      "  add: [{when: \"n < 64\", backend: host}]\n");
  auto rc = load_routes_file(file);
  const auto& mm = rc.routes.at("mm");
  ASSERT_EQ(mm.cases.size(), 2u);
  EXPECT_EQ(mm.cases[0].when.text(), "m <= 16");
  EXPECT_EQ(mm.cases[0].backend, "opencl");
  EXPECT_EQ(mm.cases[0].config, "variant=2");
  EXPECT_EQ(mm.cases[0].origin, file + ":3");
  EXPECT_EQ(mm.cases[1].origin, file + ":4");
  EXPECT_EQ(mm.backend, "clblast");
  EXPECT_EQ(mm.origin, file + ":5");
  const auto& add = rc.routes.at("add");
  ASSERT_EQ(add.cases.size(), 1u);
  EXPECT_EQ(add.backend, "") << "no fallback: the next tier routes what no condition takes";

  std::string what;
  auto syntax = d.write("s.yaml", "routes:\n  mm:\n    - {when: \"m <== 16\", backend: host}\n");
  EXPECT_EQ(code_of([&] { load_routes_file(syntax); }, &what), errc::config_error);
  EXPECT_NE(what.find(syntax + ":3"), std::string::npos) << what;
  EXPECT_NE(what.find("'m <== 16'"), std::string::npos) << what;
  auto order =
      d.write("o.yaml", "routes:\n  mm:\n    - {backend: host}\n    - {when: \"m < 2\", backend: opencl}\n");
  EXPECT_EQ(code_of([&] { load_routes_file(order); }, &what), errc::config_error);
  EXPECT_NE(what.find(order + ":4"), std::string::npos) << what;
  EXPECT_NE(what.find("put the fallback last"), std::string::npos) << what;
  auto key = d.write("k.yaml", "routes:\n  mm:\n    - {when: \"m < 2\", backend: opencl, cfg: x}\n");
  EXPECT_EQ(code_of([&] { load_routes_file(key); }, &what), errc::config_error);
  EXPECT_NE(what.find("unknown key 'cfg'"), std::string::npos) << what;
  EXPECT_NE(what.find("valid keys: when, backend, config"), std::string::npos) << what;
  auto empty = d.write("e.yaml", "routes:\n  mm: []\n");
  EXPECT_EQ(code_of([&] { load_routes_file(empty); }, &what), errc::config_error);
  EXPECT_NE(what.find("empty route list"), std::string::npos) << what;
}

TEST(DispatchRouting, ConditionsKeepEachTiersPrecedence) {
  const shape_key small{{"m", 4}, {"n", 64}, {"k", 64}};
  const shape_key big{{"m", 400}, {"n", 64}, {"k", 64}};
  routes_config routes;  // no fallback: what no condition takes goes on to the vendor tier
  routes.routes["mm"] = {
      "", "", "routes.yaml:2", {{route_condition::parse("m <= 16"), "host", "", "routes.yaml:3"}}};
  vendor_profile vendor;
  vendor.name = "v";
  vendor.routes["mm"] = {"clblast",
                         "",
                         "vendor.yaml:5",
                         {{route_condition::parse("m >= 256"), "opencl", "wg=64", "vendor.yaml:6"}}};
  env_settings no_env;
  auto r = resolve_route(op("mm"), {&no_env, &routes, &vendor});
  ASSERT_EQ(r.cases.size(), 2u);
  auto s = route_for_shape(r, small);
  EXPECT_EQ(s.backend, "host");
  EXPECT_EQ(s.tier, source_tier::routes);
  EXPECT_EQ(s.origin, "routes.yaml:3");
  EXPECT_TRUE(s.above_db());
  auto b = route_for_shape(r, big);
  EXPECT_EQ(b.backend, "opencl");
  EXPECT_EQ(b.config, "wg=64");
  EXPECT_EQ(b.tier, source_tier::vendor);
  EXPECT_EQ(b.origin, "vendor.yaml:6");
  EXPECT_FALSE(b.above_db()) << "a vendor condition stays below the tuning database";
  auto mid = route_for_shape(r, shape_key{{"m", 64}, {"n", 64}, {"k", 64}});
  EXPECT_EQ(mid.backend, "clblast");
  EXPECT_EQ(mid.origin, "vendor.yaml:5");
  EXPECT_TRUE(mid.cases.empty());
  // env outranks every condition; a plain routes entry hides the vendor's conditions.
  env_settings env;
  env.routes.push_back({"mm", "opencl", "PRISM_OP_mm"});
  EXPECT_TRUE(resolve_route(op("mm"), {&env, &routes, &vendor}).cases.empty());
  routes_config plain;
  plain.routes["mm"] = {"clblast", "", "plain.yaml:2"};
  auto p = resolve_route(op("mm"), {&no_env, &plain, &vendor});
  EXPECT_TRUE(p.cases.empty());
  EXPECT_EQ(route_for_shape(p, big).backend, "clblast");
  // Neither source has a fallback: the built-in order takes the rest.
  vendor.routes["mm"].backend = "";
  auto none = route_for_shape(resolve_route(op("mm"), {&no_env, &routes, &vendor}), shape_key{{"m", 64}});
  EXPECT_EQ(none.backend, "opencl");
  EXPECT_EQ(none.tier, source_tier::default_order);
}

TEST(DispatchRouting, ConditionsAreValidatedAgainstTheOpsKey) {
  std::vector<op_catalog_entry> keyed = catalog;
  for (auto& e : keyed)
    e.key_names = e.name == "mm" ? std::vector<std::string>{"m", "n", "k"} : std::vector<std::string>{"n"};
  env_settings env;
  routes_config rc;
  rc.routes["mm"] = {
      "opencl", "", "r.yaml:2", {{route_condition::parse("m <= 16 && rows > 2"), "host", "", "r.yaml:3"}}};
  std::string what;
  EXPECT_EQ(code_of([&] { validate_sources(keyed, backends, env, &rc, {}); }, &what), errc::config_error);
  EXPECT_NE(what.find("r.yaml:3"), std::string::npos) << what;
  EXPECT_NE(what.find("'m <= 16 && rows > 2' reads 'rows'"), std::string::npos) << what;
  EXPECT_NE(what.find("valid components: m, n, k"), std::string::npos) << what;
  rc.routes["mm"].cases[0] = {route_condition::parse("m <= 16"), "cublas", "", "r.yaml:3"};
  EXPECT_EQ(code_of([&] { validate_sources(keyed, backends, env, &rc, {}); }, &what), errc::not_found);
  EXPECT_NE(what.find("r.yaml:3"), std::string::npos) << what;
  EXPECT_NE(what.find("valid backends: opencl, clblast, host"), std::string::npos) << what;
  vendor_profile v;
  v.name = "v";
  v.routes["add"] = {"", "", "v.yaml:2", {{route_condition::parse("n < 4"), "clblast", "", "v.yaml:3"}}};
  EXPECT_EQ(code_of([&] { validate_sources(keyed, backends, env, nullptr, {v}); }, &what), errc::not_found);
  EXPECT_NE(what.find("does not implement op 'add'"), std::string::npos) << what;
  rc.routes["mm"].cases[0].backend = "host";
  v.routes["add"].cases[0].backend = "host";
  EXPECT_NO_THROW(validate_sources(keyed, backends, env, &rc, {v}));
}
