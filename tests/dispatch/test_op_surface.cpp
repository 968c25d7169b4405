// SPDX-License-Identifier: Apache-2.0
// The op surface: every registered op is reachable from the public API (prism/ops.hpp) and from
// `prism run` under its own name; every public op function dispatches a registered op of its
// own name; the public API's defaulted parameters equal the descriptor's attribute defaults;
// and every line those calls write to the dispatch log replays (prism run --replay).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "dispatch/dispatcher.hpp"
#include "dispatch/log/dispatch_log.hpp"
#include "dispatch/op_run.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/ops.hpp"
#include "prism/runtime.hpp"
#include "tests/dispatch/test_support.hpp"

using namespace prism;
namespace pd = prism::dispatch;
namespace fs = std::filesystem;

namespace {

// Public functions that dispatch no registered op of their own name: none. (matmul was one until
// the one GEMM lowering made it an op.) A new entry here needs a reason beside it.
const std::set<std::string> known_exceptions = {};

// PyTorch's names for another op's call: the public function -> the op it dispatches.
const std::map<std::string, std::string> aliases = {{"contiguous", "copy"}, {"full", "fill"}};

queue& test_queue() {
  static auto* q = new queue();
  return *q;
}

[[maybe_unused]] const auto* const drain_queue_env = prism::test::drain_before_exit(&test_queue);

tensor filled(queue& q, dims shape, float v = 0.5f, dtype t = dtype::f32) {
  std::vector<float> values(static_cast<std::size_t>(shape.product()), v);
  return tensor::from_floats(q, values, shape, t);
}

// One public function of an op, called with every defaulted parameter omitted.
struct public_call {
  std::function<void(queue&)> call;
  /// Attributes its non-defaulted parameters set (not compared with the descriptor's defaults).
  std::set<std::string> explicit_attrs = {};
};

// The table: every registered op -> a call of its public function.
std::map<std::string, public_call> public_calls() {
  std::map<std::string, public_call> t;
  auto x = [](queue& q) { return filled(q, {2, 4}); };
  t["neg"] = {[=](queue& q) { ops::neg(q, x(q)); }};
  t["abs"] = {[=](queue& q) { ops::abs(q, x(q)); }};
  t["exp"] = {[=](queue& q) { ops::exp(q, x(q)); }};
  t["log"] = {[=](queue& q) { ops::log(q, x(q)); }};
  t["sqrt"] = {[=](queue& q) { ops::sqrt(q, x(q)); }};
  t["rsqrt"] = {[=](queue& q) { ops::rsqrt(q, x(q)); }};
  t["sin"] = {[=](queue& q) { ops::sin(q, x(q)); }};
  t["cos"] = {[=](queue& q) { ops::cos(q, x(q)); }};
  t["tanh"] = {[=](queue& q) { ops::tanh(q, x(q)); }};
  t["sigmoid"] = {[=](queue& q) { ops::sigmoid(q, x(q)); }};
  t["relu"] = {[=](queue& q) { ops::relu(q, x(q)); }};
  t["silu"] = {[=](queue& q) { ops::silu(q, x(q)); }};
  t["gelu"] = {[=](queue& q) { ops::gelu(q, x(q)); }};
  t["add"] = {[=](queue& q) { ops::add(q, x(q), x(q)); }};
  t["sub"] = {[=](queue& q) { ops::sub(q, x(q), x(q)); }};
  t["mul"] = {[=](queue& q) { ops::mul(q, x(q), x(q)); }};
  t["div"] = {[=](queue& q) { ops::div(q, x(q), x(q)); }};
  t["maximum"] = {[=](queue& q) { ops::maximum(q, x(q), x(q)); }};
  t["minimum"] = {[=](queue& q) { ops::minimum(q, x(q), x(q)); }};
  t["pow"] = {[=](queue& q) { ops::pow(q, x(q), x(q)); }};
  t["sum"] = {[=](queue& q) { ops::sum(q, x(q)); }};
  t["mean"] = {[=](queue& q) { ops::mean(q, x(q)); }};
  t["max"] = {[=](queue& q) { ops::max(q, x(q)); }};
  t["min"] = {[=](queue& q) { ops::min(q, x(q)); }};
  t["argmax"] = {[=](queue& q) { ops::argmax(q, x(q)); }};
  t["softmax"] = {[=](queue& q) { ops::softmax(q, x(q)); }};
  t["log_softmax"] = {[=](queue& q) { ops::log_softmax(q, x(q)); }};
  t["layer_norm"] = {[=](queue& q) { ops::layer_norm(q, x(q)); }};
  t["rms_norm"] = {[=](queue& q) { ops::rms_norm(q, x(q)); }};
  t["fused_add_rms_norm"] = {[=](queue& q) {
    tensor residual = x(q);
    ops::fused_add_rms_norm(q, x(q), residual);
  }};
  t["fused_add_layer_norm"] = {[=](queue& q) {
    tensor residual = x(q);
    ops::fused_add_layer_norm(q, x(q), residual);
  }};
  t["l2_normalize"] = {[=](queue& q) { ops::l2_normalize(q, x(q)); }};
  t["masked_mean"] = {[](queue& q) { ops::masked_mean(q, filled(q, {2, 3, 4})); }};
  // cos and sin as the two halves of one cache: separate caches are concatenated along dim 1
  // first, and that cat's log line does not replay (cat's shape key, inputs and n, does not say
  // the rank and dim, so replay rebuilds 1-D inputs).
  t["rotary_embedding"] = {[](queue& q) {
    tensor cache = filled(q, {8, 4});
    ops::rotary_embedding(q, filled(q, {3, 2, 4}), filled(q, {3}, 1.0f, dtype::i64), cache.slice(1, 0, 2),
                          cache.slice(1, 2, 4));
  }};
  t["silu_and_mul"] = {[=](queue& q) { ops::silu_and_mul(q, x(q)); }};
  t["linear_silu_and_mul"] = {[](queue& q) {
    ops::linear_silu_and_mul(q, filled(q, {2, 3}), filled(q, {4, 3}));
  }};
  t["rms_norm_linear"] = {[](queue& q) {
    ops::rms_norm_linear(q, filled(q, {2, 3}), filled(q, {3}), filled(q, {4, 3}));
  }};
  t["post_attention"] = {[](queue& q) {
    ops::post_attention(q, filled(q, {1, 3}), filled(q, {1, 4}), filled(q, {3, 4}), filled(q, {3}),
                        filled(q, {10, 3}), filled(q, {3, 5}));
  }};
  // A KV cache [2, 1 kv head, 8 positions, head_dim 4] and a qkv row of 2 q heads + k + v.
  t["qkv_rope_cache"] = {[](queue& q) {
    tensor cache = filled(q, {2, 1, 8, 4});
    ops::qkv_rope_cache(q, filled(q, {1, 16}), filled(q, {1}, 1.0f, dtype::i64), filled(q, {8, 4}), cache);
  }};
  t["kv_cache_attention"] = {[](queue& q) {
    ops::kv_cache_attention(q, filled(q, {1, 2, 4}), filled(q, {2, 1, 8, 4}),
                            filled(q, {1}, 1.0f, dtype::i64));
  }};
  t["decode_attention"] = {[](queue& q) {
    tensor cache = filled(q, {2, 1, 8, 4});
    ops::decode_attention(q, filled(q, {1, 16}), filled(q, {1}, 1.0f, dtype::i64), filled(q, {8, 4}), cache);
  }};
  t["gelu_and_mul"] = {[=](queue& q) { ops::gelu_and_mul(q, x(q)); }};
  t["embedding"] = {[](queue& q) { ops::embedding(q, filled(q, {5, 3}), filled(q, {4}, 2.0f, dtype::i64)); }};
  t["cat"] = {[=](queue& q) { ops::cat(q, {x(q), x(q)}); }};
  t["copy"] = {[=](queue& q) {
    tensor dst = x(q);
    ops::copy(q, dst, x(q));
  }};
  t["cast"] = {[=](queue& q) { ops::cast(q, x(q), dtype::f16); }, {"dtype"}};
  t["fill"] = {[=](queue& q) {
                 tensor out = x(q);
                 ops::fill(q, out, 2.0);
               },
               {"value"}};
  t["zeros"] = {[](queue& q) { ops::zeros(q, {4}); }, {"shape"}};
  t["arange"] = {[](queue& q) { ops::arange(q, 1.0, 5.0); }, {"start", "end"}};
  t["mm"] = {[](queue& q) { ops::mm(q, filled(q, {2, 3}), filled(q, {3, 4})); }};
  t["bmm"] = {[](queue& q) { ops::bmm(q, filled(q, {2, 2, 3}), filled(q, {2, 3, 4})); }};
  t["addmm"] = {[](queue& q) { ops::addmm(q, filled(q, {4}), filled(q, {2, 3}), filled(q, {3, 4})); }};
  t["linear"] = {[](queue& q) { ops::linear(q, filled(q, {2, 3}), filled(q, {4, 3})); }};
  t["matmul"] = {[](queue& q) { ops::matmul(q, filled(q, {2, 2, 3}), filled(q, {3, 4})); }};
  t["scaled_dot_product_attention"] = {[](queue& q) {
    ops::scaled_dot_product_attention(q, filled(q, {1, 2, 3, 4}), filled(q, {1, 2, 5, 4}),
                                      filled(q, {1, 2, 5, 4}));
  }};
  return t;
}

// The dispatch log of what `run` dispatches, parsed back.
std::vector<pd::log_record> logged(const std::function<void()>& run) {
  static int n = 0;
  const fs::path file = fs::temp_directory_path() /
                        ("prism_op_surface_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  ::setenv("PRISM_LOG_DISPATCH", "1", 1);
  ::setenv("PRISM_LOG_DISPATCH_FILE", file.c_str(), 1);
  pd::testing::reload_config();
  run();
  ::unsetenv("PRISM_LOG_DISPATCH");
  ::unsetenv("PRISM_LOG_DISPATCH_FILE");
  pd::testing::reload_config();
  std::ifstream in(file);
  auto records = pd::parse_log(in);
  fs::remove(file);
  return records;
}

// The public op functions prism/ops.hpp declares, by name ("add_out" -> "add", "rotary_embedding_"
// -> "rotary_embedding").
std::set<std::string> public_function_names() {
  std::ifstream in(std::string(PRISM_SOURCE_DIR) + "/include/prism/ops.hpp");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::set<std::string> names;
  static const std::regex decl(R"(\ntensor&? (\w+)\(queue& q)");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), decl); it != std::sregex_iterator(); ++it) {
    std::string n = (*it)[1];
    if (n.size() > 4 && n.ends_with("_out")) n.resize(n.size() - 4);
    if (n.ends_with("_")) n.pop_back();
    names.insert(n);
  }
  return names;
}

}  // namespace

TEST(OpSurface, EveryRegisteredOpHasAPublicFunctionOfItsName) {
  const auto table = public_calls();
  for (const auto* d : op_registry::instance().all())
    EXPECT_TRUE(table.count(d->name)) << "registered op '" << d->name
                                      << "' has no public function in this table: add prism::ops::" << d->name
                                      << " (include/prism/ops.hpp) and its call here";
  for (const auto& [name, entry] : table)
    EXPECT_TRUE(op_registry::instance().find(name))
        << "the table names '" << name << "', which is not registered";
}

TEST(OpSurface, EveryPublicFunctionNamesARegisteredOp) {
  const auto names = public_function_names();
  ASSERT_GT(names.size(), 40u) << "include/prism/ops.hpp was not read";
  for (const auto& n : names) {
    if (aliases.count(n)) {
      EXPECT_TRUE(op_registry::instance().find(aliases.at(n))) << n << " -> " << aliases.at(n);
    } else if (known_exceptions.count(n)) {
      EXPECT_FALSE(op_registry::instance().find(n))
          << "'" << n << "' is registered now: remove it from known_exceptions and add it to public_calls()";
    } else {
      EXPECT_TRUE(op_registry::instance().find(n))
          << "prism::ops::" << n << " is public but no registered op is named '" << n << "'";
    }
  }
  for (const auto& n : known_exceptions)
    EXPECT_TRUE(names.count(n)) << n << " is no public function any more";
}

// Each public call dispatches its own op, with the descriptor's defaults for every attribute it
// does not set; then every line it logged replays and passes its check.
TEST(OpSurface, PublicDefaultsEqualTheDescriptorsAndEveryLogLineReplays) {
  auto& q = test_queue();
  const auto table = public_calls();
  std::map<std::string, std::vector<pd::log_record>> by_entry;
  for (const auto& [name, entry] : table) {
    by_entry[name] = logged([&] {
      entry.call(q);
      q.wait_and_throw();
    });
  }
  for (const auto& [name, entry] : table) {
    SCOPED_TRACE("prism::ops::" + name);
    const auto& d = op_registry::instance().get(name);
    const pd::log_record* own = nullptr;
    for (const auto& r : by_entry[name])
      if (r.op == name) own = &r;
    if (!own) {
      ADD_FAILURE() << "the public function dispatched no '" << name << "' call";
      continue;
    }
    const attr_map got = parse_attrs(own->attrs);
    for (const auto& a : d.attrs) {
      if (entry.explicit_attrs.count(a.name)) continue;
      auto it = got.find(a.name);
      if (a.optional && it == got.end()) continue;
      if (it == got.end()) {
        ADD_FAILURE() << "attribute '" << a.name << "' did not reach the dispatcher";
        continue;
      }
      EXPECT_EQ(format_attr(it->second), format_attr(a.default_value))
          << "the public default of '" << a.name << "' differs from the descriptor's";
    }
    for (const auto& r : by_entry[name]) {
      SCOPED_TRACE("replay " + pd::format_log_line(r));
      try {
        const auto rep = pd::replay(q, r);
        EXPECT_TRUE(rep.checked && rep.ok) << rep.check_message;
        EXPECT_EQ(rep.decision.backend, r.backend);
      } catch (const prism::error& e) {
        ADD_FAILURE() << "replay failed: " << e.what();
      }
    }
  }
}

// `prism run <op> --dry-run`'s path (dispatch::plan_run) for every registered op, by name.
TEST(OpSurface, EveryRegisteredOpRunsFromPrismRun) {
  auto& q = test_queue();
  for (const auto* d : op_registry::instance().all()) {
    ASSERT_FALSE(d->config_test_shapes.empty()) << d->name;
    pd::run_request r;
    r.op = d->name;
    r.shape = d->config_test_shapes.front();
    r.dtype = dtype_name(d->dtypes.front());
    const auto plan = pd::plan_run(q, r);
    EXPECT_EQ(plan.call.rfind(d->name + "(", 0), 0u) << plan.call;
    EXPECT_FALSE(plan.decision.implementation.empty()) << d->name;
  }
  for (const auto& n : known_exceptions) {
    pd::run_request r;
    r.op = n;
    EXPECT_EQ(test::code_of([&] { pd::plan_run(q, r); }), errc::not_found) << n;
  }
}

// The facts issue 11 removed, kept from coming back: the CLI reaches ops only through dispatch
// (dispatch/op_run.hpp), and the public functions are written out, not generated by macros.
TEST(OpSurface, CliUsesNoKernelsHeaderAndOpsApiNoMacros) {
  const fs::path root = PRISM_SOURCE_DIR;
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  int cli_files = 0;
  for (const auto& e : fs::directory_iterator(root / "cli")) {
    if (e.path().extension() != ".cpp" && e.path().extension() != ".hpp") continue;
    ++cli_files;
    EXPECT_EQ(read(e.path()).find("#include \"kernels/"), std::string::npos)
        << e.path() << " includes a kernels header; go through dispatch/ (op_run.hpp for op calls)";
  }
  EXPECT_GT(cli_files, 3);
  const std::string api = read(root / "dispatch" / "ops_api.cpp");
  ASSERT_FALSE(api.empty());
  EXPECT_EQ(api.find("#define"), std::string::npos) << "dispatch/ops_api.cpp: write each public function out";
}
