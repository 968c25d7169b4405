// SPDX-License-Identifier: Apache-2.0
// Op attributes come from the descriptor: unknown names and values of another type are errors
// naming op, attribute and what is valid; defaults are filled in once (complete_attrs), so an
// omitted attribute and an explicit default give one decision, log line and tuning key.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dispatch/dispatcher.hpp"
#include "dispatch/log/dispatch_log.hpp"
#include "kernels/op_descriptor.hpp"
#include "prism/ops.hpp"
#include "prism/runtime.hpp"
#include "tests/dispatch/test_support.hpp"

using namespace prism;
using prism::test::code_of;
namespace pd = prism::dispatch;
namespace fs = std::filesystem;

namespace {

queue& test_queue() {
  static auto* q = new queue();
  return *q;
}

[[maybe_unused]] const auto* const drain_queue_env = prism::test::drain_before_exit(&test_queue);

const op_descriptor& op(std::string_view name) {
  return op_registry::instance().get(name);
}

op_call call_with(std::string name, attr_map attrs) {
  op_call c;
  c.op = std::move(name);
  c.attrs = std::move(attrs);
  return c;
}

tensor ones(queue& q, std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n), 1.0f);
  return tensor::from_floats(q, v, dims{n}, dtype::f32);
}

// The dispatch log of the calls `run` makes, parsed back (logging on, then restored).
std::vector<pd::log_record> logged(const std::function<void()>& run) {
  static int n = 0;
  const fs::path file =
      fs::temp_directory_path() / ("prism_attrs_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
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

// A log line without the fields that differ between two calls of one decision (when and by
// which process it was written).
std::string same_call(pd::log_record r) {
  r.timestamp.clear();
  r.pid = 0;
  return pd::format_log_line(r);
}

}  // namespace

TEST(Attrs, UnknownNameListsTheValidOnesWithADidYouMean) {
  std::string what;
  auto c = call_with("add", {{"alhpa", 2.0}});
  EXPECT_EQ(code_of([&] { complete_attrs(op("add"), c); }, &what), errc::invalid_argument);
  EXPECT_NE(what.find("ops::add"), std::string::npos) << what;
  EXPECT_NE(what.find("unknown attribute 'alhpa' (did you mean 'alpha'?)"), std::string::npos) << what;
  EXPECT_NE(what.find("valid attributes of add: scalar, alpha"), std::string::npos) << what;

  auto far = call_with("softmax", {{"axis", std::int64_t{0}}});
  EXPECT_EQ(code_of([&] { complete_attrs(op("softmax"), far); }, &what), errc::invalid_argument);
  EXPECT_EQ(what.find("did you mean"), std::string::npos) << "no attribute is close to 'axis': " << what;
  EXPECT_NE(what.find("valid attributes of softmax: dim"), std::string::npos) << what;

  auto none = call_with("relu", {{"alpha", 1.0}});
  EXPECT_EQ(code_of([&] { complete_attrs(op("relu"), none); }, &what), errc::invalid_argument);
  EXPECT_NE(what.find("relu takes no attributes"), std::string::npos) << what;
}

TEST(Attrs, WrongTypeNamesTheExpectedType) {
  std::string what;
  auto c = call_with("layer_norm", {{"eps", true}});
  EXPECT_EQ(code_of([&] { complete_attrs(op("layer_norm"), c); }, &what), errc::invalid_argument);
  EXPECT_NE(what.find("ops::layer_norm: attribute 'eps' must be a number; got true"), std::string::npos)
      << what;
  auto d = call_with("softmax", {{"dim", 1.5}});
  EXPECT_EQ(code_of([&] { complete_attrs(op("softmax"), d); }, &what), errc::invalid_argument);
  EXPECT_NE(what.find("attribute 'dim' must be an integer; got 1.5"), std::string::npos) << what;
  auto g = call_with("gelu", {{"approximate", std::int64_t{1}}});
  EXPECT_EQ(code_of([&] { complete_attrs(op("gelu"), g); }, &what), errc::invalid_argument);
  EXPECT_NE(what.find("attribute 'approximate' must be a word; got 1"), std::string::npos) << what;
  auto k = call_with("sum", {{"keepdim", std::int64_t{2}}});
  EXPECT_EQ(code_of([&] { complete_attrs(op("sum"), k); }, &what), errc::invalid_argument);
  EXPECT_NE(what.find("attribute 'keepdim' must be true or false; got 2"), std::string::npos) << what;
}

TEST(Attrs, DefaultsFilledInTheDeclaredTypes) {
  // Integers are stored as the declared type: `--attrs alpha=2` is alpha=2.0.
  auto c = call_with("add", {{"alpha", std::int64_t{2}}});
  complete_attrs(op("add"), c);
  EXPECT_EQ(format_attrs(c.attrs), "alpha=2.0") << "scalar is optional: absent unless given";
  auto r = call_with("sum", {{"dims", std::int64_t{1}}, {"keepdim", std::int64_t{1}}});
  complete_attrs(op("sum"), r);
  EXPECT_EQ(format_attrs(r.attrs), "dims=[1];keepdim=true");
  auto n = call_with("rms_norm", {});
  EXPECT_FALSE(attrs_complete(op("rms_norm"), n));
  complete_attrs(op("rms_norm"), n);
  EXPECT_TRUE(attrs_complete(op("rms_norm"), n));
  EXPECT_EQ(format_attrs(n.attrs), "eps=1e-06");
  // Every registered op: completing an empty call gives exactly its non-optional defaults.
  for (const auto* d : op_registry::instance().all()) {
    auto e = call_with(d->name, {});
    complete_attrs(*d, e);
    attr_map want;
    for (const auto& a : d->attrs)
      if (!a.optional) want.emplace(a.name, a.default_value);
    EXPECT_EQ(format_attrs(e.attrs), format_attrs(want)) << d->name;
  }
}

TEST(Attrs, DispatchRejectsAnUnknownNameBeforeEnqueuing) {
  auto& q = test_queue();
  tensor a = ones(q, 8), b = ones(q, 8), out = tensor::empty(q, {8}, dtype::f32);
  ops::fill(q, out, 5.0);
  op_call c;
  c.op = "add";
  c.inputs = {a, b};
  c.outputs = {out};
  c.attrs = {{"alhpa", 2.0}};
  std::string what;
  EXPECT_EQ(code_of([&] { pd::dispatch_call(q, c); }, &what), errc::invalid_argument);
  EXPECT_NE(what.find("did you mean 'alpha'"), std::string::npos) << what;
  EXPECT_EQ(code_of([&] { pd::plan_call(q, c); }), errc::invalid_argument);
  EXPECT_EQ(out.to_floats(q), std::vector<float>(8, 5.0f)) << "nothing was enqueued";
}

TEST(Attrs, OmittedAndExplicitDefaultAreOneDecisionAndLogLine) {
  auto& q = test_queue();
  tensor x = ones(q, 64);
  auto run = [&](attr_map attrs) {
    op_call c;
    c.op = "rms_norm";
    c.inputs = {x, tensor()};
    c.attrs = std::move(attrs);
    pd::dispatch_call(q, c);
    q.wait();
    return c.attrs;
  };
  attr_map omitted, explicit_default, as_integer;
  auto records = logged([&] {
    omitted = run({});
    explicit_default = run({{"eps", 1e-6}});
  });
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].attrs, "eps=1e-06");
  EXPECT_EQ(same_call(records[0]), same_call(records[1]));
  EXPECT_EQ(format_attrs(omitted), format_attrs(explicit_default)) << "the call is completed in place";

  // An integer for a real is the same call too (`prism run add --attrs alpha=2`).
  tensor a = ones(q, 16), b = ones(q, 16);
  auto add_records = logged([&] {
    for (attr_value alpha : {attr_value(2.0), attr_value(std::int64_t{2})}) {
      op_call c;
      c.op = "add";
      c.inputs = {a, b};
      c.attrs = {{"alpha", alpha}};
      pd::dispatch_call(q, c);
      EXPECT_EQ(c.outputs[0].to_floats(q), std::vector<float>(16, 3.0f));
    }
  });
  ASSERT_EQ(add_records.size(), 2u);
  EXPECT_EQ(add_records[0].attrs, "alpha=2.0");
  EXPECT_EQ(same_call(add_records[0]), same_call(add_records[1]));
}

TEST(Attrs, KernelEntryPointsCompleteACallThatSkippedTheDispatcher) {
  // Suites and benchmarks call descriptors directly; they see the descriptor's defaults too.
  auto& q = test_queue();
  const auto& d = op("softmax");
  op_call c;
  c.op = "softmax";
  c.inputs = {tensor::from_floats(q, std::vector<float>{0, 0, 0, 0}, dims{2, 2}, dtype::f32)};
  c.outputs = {tensor::empty(q, {2, 2}, dtype::f32)};
  check_call(d, c);
  EXPECT_TRUE(c.attrs.empty()) << "check_call checks a completed copy";
  enqueue_opencl(q, d, c).wait();
  EXPECT_EQ(c.outputs[0].to_floats(q), std::vector<float>(4, 0.5f));
  auto expected = compute_reference(q, d, c);
  EXPECT_EQ(expected[0].values, std::vector<double>(4, 0.5));
  c.attrs = {{"dimm", std::int64_t{0}}};
  EXPECT_EQ(code_of([&] { check_call(d, c); }), errc::invalid_argument);
}
