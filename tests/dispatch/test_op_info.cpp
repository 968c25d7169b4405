// Ops by name (prism/op_info.hpp) and the run-time dispatch-log switch: what bindings use. The
// generic call gives what the typed function gives; tensors over foreign host memory
// (tensor::wrap_host) go through ops in place; fallback lines reach the log.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "prism/dispatch.hpp"
#include "prism/error.hpp"
#include "prism/op_info.hpp"
#include "prism/ops.hpp"

using namespace prism;

namespace {
queue& test_queue() {
  static auto* q = new queue();
  return *q;
}
}  // namespace

TEST(OpInfo, EveryDispatchableOpIsDescribed) {
  const auto& infos = ops::op_infos();
  const auto names = dispatch::op_names();
  ASSERT_EQ(infos.size(), names.size());
  for (std::size_t i = 0; i < infos.size(); ++i) {
    EXPECT_EQ(infos[i].name, names[i]);
    EXPECT_EQ(ops::op_id(infos[i].name), static_cast<int>(i));
  }
  const auto& add = ops::describe_op("add");
  ASSERT_EQ(add.inputs.size(), 2u);
  EXPECT_TRUE(add.inputs[1].optional);  // a scalar operand leaves it out
  bool alpha = false;
  for (const auto& a : add.attrs)
    if (a.name == "alpha") alpha = std::get<double>(a.default_value) == 1.0;
  EXPECT_TRUE(alpha);
  EXPECT_TRUE(ops::describe_op("cat").variadic_inputs);
  try {
    ops::describe_op("softmaxx");
    FAIL() << "an unknown op was described";
  } catch (const prism::error& e) {
    EXPECT_EQ(e.code(), errc::not_found);
    EXPECT_NE(std::string(e.what()).find("softmax"), std::string::npos) << e.what();
  }
}

TEST(OpInfo, GenericCallMatchesTheTypedFunction) {
  auto& q = test_queue();
  std::vector<float> av = {1, 2, 3, 4, 5, 6}, bv = {10, 20, 30};
  tensor a = tensor::from_floats(q, av, {2, 3}, dtype::f32);
  tensor b = tensor::from_floats(q, bv, {3}, dtype::f32);
  const int add = ops::op_id("add");
  auto specs = ops::infer_outputs(add, {a, b}, {{"alpha", 2.0}});
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].shape, (dims{2, 3}));
  auto outs = ops::call(q, add, {a, b}, {{"alpha", 2.0}});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].to_floats(q), ops::add(q, a, b, 2.0).to_floats(q));
  // An undefined output among given ones is allocated.
  auto given = ops::call(q, add, {a, tensor{}}, {{"scalar", 1.0}}, {tensor{}});
  EXPECT_EQ(given[0].to_floats(q), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  try {
    ops::call(q, add, {a, b}, {{"alpha", std::string("two")}});
    FAIL() << "a word for a number was accepted";
  } catch (const prism::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("alpha"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ops::call(q, 100000, {a}), prism::error);
  // Trailing optional inputs may be left out; a left-out required one is still an error.
  auto omitted = ops::call(q, add, {a}, {{"scalar", 1.0}});
  EXPECT_EQ(omitted[0].to_floats(q), (std::vector<float>{2, 3, 4, 5, 6, 7}));
  try {
    ops::call(q, add, {}, {{"scalar", 1.0}});
    FAIL() << "a call without its required input was accepted";
  } catch (const prism::error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("got 0 inputs"), std::string::npos) << e.what();
  }
}

TEST(OpInfo, OpsWorkInPlaceOnWrappedHostMemory) {
  auto& q = test_queue();
  // A strided view that starts 3 elements into its allocation (not 128-byte aligned).
  auto mem =
      std::shared_ptr<float>(static_cast<float*>(std::aligned_alloc(128, 256 * sizeof(float))), std::free);
  for (int i = 0; i < 256; ++i) mem.get()[i] = static_cast<float>(i);
  tensor view = tensor::wrap_host(q, mem.get() + 3, {4, 5}, {10, 2}, dtype::f32, mem);
  EXPECT_EQ(view.storage().host_memory(), reinterpret_cast<std::byte*>(mem.get()));
  auto got = view.to_floats(q);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 5; ++c) EXPECT_EQ(got[r * 5 + c], 3 + r * 10 + c * 2);
  tensor negated = ops::neg(q, view);
  ops::copy(q, view, negated);  // copy writes strided views
  q.wait();
  {
    host_accessor<std::byte> sync(view.storage(), read_only);  // the memory is current after a map
  }
  EXPECT_EQ(mem.get()[3], -3.0f);
  EXPECT_EQ(mem.get()[3 + 10 + 2], -15.0f);
  EXPECT_EQ(mem.get()[4], 4.0f);  // between the view's elements: untouched
  EXPECT_EQ(mem.get()[0], 0.0f);
  try {
    tensor::wrap_host(q, reinterpret_cast<std::byte*>(mem.get()) + 1, {2}, {1}, dtype::f32, mem);
    FAIL() << "a misaligned pointer was accepted";
  } catch (const prism::error& e) {
    EXPECT_NE(std::string(e.what()).find("aligned"), std::string::npos) << e.what();
  }
}

TEST(OpInfo, LogSwitchAndFallbackLines) {
  auto& q = test_queue();
  auto path =
      std::filesystem::temp_directory_path() / ("prism-op-info-" + std::to_string(::getpid()) + ".csv");
  std::filesystem::remove(path);
  const auto before = dispatch::get_log_options();
  dispatch::set_log_options({"1", path.string(), ""});
  EXPECT_EQ(dispatch::get_log_options().mode, "1");
  ops::relu(q, tensor::from_floats(q, std::vector<float>{-1, 1}, {2}, dtype::f32));
  dispatch::log_fallback("aten::tanh", "f64", "4x4", "torch", "self has dtype torch.float64");
  dispatch::set_log_options(before);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("prism_dispatch_header"), std::string::npos);
  EXPECT_NE(text.str().find(",exec,"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find(",relu,"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("fallback"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("self has dtype torch.float64"), std::string::npos) << text.str();
  std::filesystem::remove(path);
  try {
    dispatch::set_log_options({"loud", "", ""});
    FAIL() << "a bad mode was accepted";
  } catch (const prism::error& e) {
    EXPECT_NE(std::string(e.what()).find("valid: 0, 1, profile, dispatch, all"), std::string::npos)
        << e.what();
  }
}
