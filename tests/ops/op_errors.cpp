// SPDX-License-Identifier: Apache-2.0
// Framework tests (attribute/shape-key/config text forms, tune_configs parsing, dtype
// conversions, tensor views) and targeted bad-input tests: each must raise prism::error naming
// the op, the argument and what is valid, with nothing enqueued.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "dispatch/dispatcher.hpp"
#include "kernels/cl_source.hpp"
#include "kernels/op_descriptor.hpp"
#include "kernels/op_support.hpp"
#include "ops_test_util.hpp"

namespace prism::test {
namespace {

using kernels::random_tensor;

const op_descriptor& op(const char* n) {
  return op_registry::instance().get(n);
}

tensor poisoned(queue& q, const dims& s, dtype t) {
  std::vector<float> v(static_cast<std::size_t>(s.product()), 42.0f);
  return tensor::from_floats(q, v, s, t);
}

// ---- framework --------------------------------------------------------------------------------

TEST(framework, attrs_round_trip) {
  attr_map m = {{"alpha", 1.5},
                {"n", std::int64_t{3}},
                {"flag", true},
                {"mode", std::string("neox")},
                {"text", std::string("a;b \"c\"")},
                {"dims", std::vector<std::int64_t>{0, -2}},
                {"whole", 2.0}};
  std::string s = format_attrs(m);
  EXPECT_EQ(parse_attrs(s), m) << s;
  EXPECT_NE(s.find("whole=2.0"), std::string::npos) << "reals keep a '.' so they parse back as reals: " << s;
  EXPECT_THROW(parse_attrs("alpha"), error);
  EXPECT_THROW(parse_attrs("dims=[1,x]"), error);
}

TEST(framework, shape_key_and_config_text) {
  shape_key k = shape_key::parse("m=128,n=4096,k=4096");
  EXPECT_EQ(k.str(), "m=128,n=4096,k=4096");
  EXPECT_EQ(k.at("n"), 4096);
  EXPECT_THROW(k.at("x"), error);
  EXPECT_THROW(shape_key::parse("m=12x"), error);
  EXPECT_THROW(shape_key::parse("m=1,m=2"), error);
  const auto& add = op("add");
  EXPECT_EQ(add.config.complete(kernel_config::parse("vec=8")).str(), "wg=256,vec=8,ept=1");
  auto why = add.config.validate(kernel_config::parse("vec=3"));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("not one of"), std::string::npos) << *why;
  EXPECT_TRUE(add.config.validate(kernel_config::parse("tile=3")));
  EXPECT_THROW(add.config.complete(kernel_config::parse("wg=7")), error);
  // decode_attention's CPU variant walks every key in one item: a key split does not apply.
  const auto& da = op("decode_attention");
  EXPECT_FALSE(da.config.validate(kernel_config::parse("variant=1")));
  EXPECT_FALSE(da.config.validate(kernel_config::parse("variant=0,chunk=32")));
  why = da.config.validate(kernel_config::parse("variant=1,chunk=32"));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("chunk=32 needs variant=0"), std::string::npos) << *why;
  // Groups merging runs of chunks (sp) are flash decoding's alone; sp takes listed values.
  EXPECT_FALSE(da.config.validate(kernel_config::parse("variant=3,chunk=32,sp=32")));
  why = da.config.validate(kernel_config::parse("variant=2,chunk=32,sp=32"));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("sp=32 (groups merging runs of chunks) is variant 3's; variant=2"), std::string::npos)
      << *why;
  why = da.config.validate(kernel_config::parse("variant=3,chunk=32,sp=24"));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("not one of"), std::string::npos) << *why;
  // post_attention's whole-block stages (qb) are the three-launch qf form's, at mb <= 2.
  const auto& pa = op("post_attention");
  EXPECT_FALSE(pa.config.validate(kernel_config::parse("chain=0,qa=1,qf=1,qb=1,mb=2")));
  EXPECT_FALSE(pa.config.validate(kernel_config::parse("chain=0,qa=1,qf=1,qb=2")));
  for (const char* bad : {"chain=1,qa=1,qf=1,qb=1", "chain=0,qa=1,qb=2"}) {
    why = pa.config.validate(kernel_config::parse(bad));
    ASSERT_TRUE(why) << bad;
    EXPECT_NE(why->find("qb=1 or 2 (stages in whole-block tasks) needs qf=1 and chain=0"), std::string::npos)
        << *why;
  }
  why = pa.config.validate(kernel_config::parse("chain=0,qa=1,qf=1,qb=1,mb=4,nb=1,wg=64,qw1=16"));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("qb=1 or 2 runs its stages at nb=32/qw, wg=32*qw"), std::string::npos) << *why;
  // The whole-block tasks' warps (qw1: stage 1, qw2: stage 2) shape only those stages.
  EXPECT_FALSE(pa.config.validate(kernel_config::parse("chain=0,qa=1,qf=1,qb=1,mb=2,qw1=16,qw2=8")));
  EXPECT_FALSE(pa.config.validate(kernel_config::parse("chain=0,qa=1,qf=1,qb=2,qw2=16")));
  for (const auto& [bad, what] : {std::pair{"chain=0,qa=1,qf=1,qb=2,qw1=8", "qw1 shapes stage 1's"},
                                  std::pair{"chain=0,qa=1,qf=1,qw2=16", "qw2 shapes stage 2's"}}) {
    why = pa.config.validate(kernel_config::parse(bad));
    ASSERT_TRUE(why) << bad;
    EXPECT_NE(why->find(what), std::string::npos) << *why;
  }
}

TEST(framework, registry_lookup) {
  EXPECT_GE(op_registry::instance().all().size(), 35u);
  try {
    op_registry::instance().get("rms_nrom");
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::not_found);
    EXPECT_NE(std::string(e.what()).find("rms_norm"), std::string::npos) << e.what();
  }
  for (const auto* d : op_registry::instance().all()) {
    EXPECT_FALSE(d->implementations.empty()) << d->name;
    EXPECT_TRUE(d->reference) << d->name;
    EXPECT_TRUE(d->key && d->flops && d->bytes && d->tol && d->sample) << d->name;
    EXPECT_FALSE(d->config.validate(d->config.defaults())) << d->name;
    for (const auto& impl : d->implementations)
      EXPECT_NO_THROW(embedded_kernel_source(impl.kernel_file)) << d->name;
  }
}

// build_kernel memoizes kernels per (file, source, options, name); PRISM_CL_OPTIONS joins every
// program's build, so a kernel built under one setting is not handed out under another.
TEST(framework, build_kernel_keys_the_environment_cl_options) {
  queue& q = shared_queue();
  const std::string src =
      "kernel void probe(global int* a) {\n#ifdef PROBE\n a[0] = PROBE;\n#else\n a[0] = -1;\n#endif\n}\n";
  auto value = [&](std::optional<std::string> extra) {
    const kernel k = [&] {
      scoped_cl_options options(std::move(extra));
      return build_kernel(q.get_context(), "probe.cl", source_override(src), "", "probe");
    }();
    buffer<int> out(q, 1);
    q.submit([&](handler& h) {
      accessor<int> a(out, h, discard_write);
      h.parallel_for(range<1>(1), k, a);
    });
    return out.read()[0];
  };
  EXPECT_EQ(value(std::nullopt), -1);
  EXPECT_EQ(value("-DPROBE=7"), 7);
  EXPECT_EQ(value(std::nullopt), -1);
}

TEST(framework, tune_configs_products_and_constraints) {
  auto spaces = parse_tune_configs(R"(
version: 1
ops:
  - family: unary
    default: {wg: 64}
  - op: exp
    default: {wg: 128, vec: 2, ept: 1}
    space:
      - {wg: 32}
      - product: {wg: [64, 128], vec: [1, 8], ept: [1, 16]}
        where: ["vec * ept <= 16", "wg % 64 == 0"]
)",
                                   "test", "inline.yaml");
  ASSERT_TRUE(spaces.count("exp"));
  ASSERT_TRUE(spaces.count("neg"));
  EXPECT_EQ(spaces["neg"].defaults.str(), "wg=64,vec=4,ept=1");
  const auto& s = spaces["exp"];
  EXPECT_EQ(s.defaults.str(), "wg=128,vec=2,ept=1");
  std::vector<std::string> got;
  for (const auto& c : s.configs) got.push_back(c.str());
  std::vector<std::string> want = {"wg=128,vec=2,ept=1",  "wg=32,vec=2,ept=1", "wg=64,vec=1,ept=1",
                                   "wg=64,vec=1,ept=16",  "wg=64,vec=8,ept=1", "wg=128,vec=1,ept=1",
                                   "wg=128,vec=1,ept=16", "wg=128,vec=8,ept=1"};
  EXPECT_EQ(got, want);
  EXPECT_THROW(parse_tune_configs("ops:\n  - op: nope\n", "t", "x.yaml"), error);
  EXPECT_THROW(parse_tune_configs("ops:\n  - op: exp\n    default: {vec: 3}\n", "t", "x.yaml"), error);
  EXPECT_THROW(parse_tune_configs(
                   "ops:\n  - op: exp\n    space:\n      - product: {vec: [1]}\n        where: [\"vec <\"]\n",
                   "t", "x.yaml"),
               error);
}

// A product is counted before it is expanded: 8 axes of 10 values (10^8 configs) is refused at
// once, naming the file and the limit, instead of running for minutes into std::bad_alloc.
TEST(framework, tune_configs_product_bomb_is_refused) {
  std::string axes;
  for (const char* p : {"vec", "wg", "ept", "a1", "a2", "a3", "a4", "a5"})
    axes += std::string(axes.empty() ? "" : ", ") + p + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]";
  const std::string text = "ops:\n  - op: exp\n    space:\n      - product: {" + axes + "}\n";
  try {
    parse_tune_configs(text, "t", "bomb.yaml");
    FAIL() << "a 10^8-config product was accepted";
  } catch (const error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("bomb.yaml"), std::string::npos) << m;
    EXPECT_NE(m.find("more than 100000 combinations"), std::string::npos) << m;
  }
}

// Constraint arithmetic is checked: overflow, INT64_MIN / -1 (SIGFPE before) and literals out
// of range are errors naming the constraint, never undefined behaviour or a bare "stoll".
TEST(framework, tune_configs_constraint_arithmetic_is_checked) {
  auto message_of = [](const std::string& constraint) -> std::string {
    std::string text = "ops:\n  - op: exp\n    space:\n      - product: {vec: [1]}\n        where: [\"" +
                       constraint + "\"]\n";
    try {
      parse_tune_configs(text, "t", "x.yaml");
    } catch (const error& e) {
      return e.what();
    }
    return "accepted";
  };
  for (const char* c : {"(0 - 9223372036854775807 - 1) / (0 - vec) == 1", "9223372036854775807 + vec > 0",
                        "(0 - 9223372036854775807) - 2 * vec < 0", "4294967296 * 4294967296 * vec > 0"}) {
    auto m = message_of(c);
    EXPECT_NE(m.find("overflows 64-bit integers"), std::string::npos) << c << ": " << m;
    EXPECT_NE(m.find("x.yaml"), std::string::npos) << m;
  }
  auto m = message_of("99999999999999999999 > vec");
  EXPECT_NE(m.find("'99999999999999999999' is out of the 64-bit integer range"), std::string::npos) << m;
  m = message_of(std::string(100, '(') + "vec" + std::string(100, ')') + " > 0");
  EXPECT_NE(m.find("nested more than 32 deep"), std::string::npos) << m;
  // x % -1 and ordinary division still work.
  EXPECT_EQ(message_of("(0 - 9223372036854775807 - 1) % (0 - vec) == 0"), "accepted");
  EXPECT_EQ(message_of("7 / (0 - vec) == 0 - 7"), "accepted");
}

// Found by fuzz/tune_configs: yaml-cpp's own exceptions escaped parse_tune_configs.
TEST(framework, tune_configs_yaml_errors_name_the_file) {
  for (const char* text : {"just a scalar\n", "ops:\n  - op: [exp]\n", "ops:\n  - family: {a: 1}\n"}) {
    try {
      parse_tune_configs(text, "t", "x.yaml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::config_error) << e.what();
      EXPECT_NE(std::string(e.what()).find("x.yaml"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a prism::error: " << e.what();
    }
  }
}

TEST(framework, vendor_tune_configs_parse) {
  for (const char* v : {"generic", "pocl", "nvidia"}) {
    for (const auto* d : op_registry::instance().all()) {
      tune_space s = dispatch::vendor_tune_space(*d, v);
      EXPECT_FALSE(s.configs.empty()) << v << " " << d->name;
      EXPECT_EQ(s.configs.front(), s.defaults);
    }
  }
  EXPECT_EQ(dispatch::vendor_tune_space(op("exp"), "generic").vendor, "generic");
}

TEST(framework, half_and_bf16_rounding) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);               // rounds to inf
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (0)
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie to even
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(parse_dtype("bfloat16"), dtype::bf16);
  EXPECT_THROW(parse_dtype("f8"), error);
}

TEST(framework, tensor_views) {
  queue& q = shared_queue();
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i);
  tensor t = tensor::from_floats(q, v, {2, 3, 4}, dtype::f32);
  tensor tr = t.transpose(0, 2);  // [4, 3, 2]
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.to_floats(q)[1], 12.0f);
  tensor c = tr.contiguous(q);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_floats(q), tr.to_floats(q));
  EXPECT_EQ(t.slice(2, 1, 4, 2).to_floats(q),
            (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_EQ(t.select(1, 2).to_floats(q), (std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_EQ(t.reshape({6, -1}).shape(), (dims{6, 4}));
  EXPECT_EQ(t.transpose(0, 1).reshape({3, 2, 2, 2}).strides(), (dims{4, 12, 2, 1}));  // splits a dim: no copy
  EXPECT_THROW(tr.reshape({24}), error);
  EXPECT_EQ(t.slice(0, 0, 1).expand({3, 3, 4}).to_floats(q)[12], 0.0f);
  EXPECT_THROW(t.expand({2, 5, 4}), error);
  EXPECT_EQ(t.unsqueeze(0).squeeze(0).shape(), t.shape());
  tensor h = tensor::from_floats(q, std::vector<float>{1.0f, 0.1f}, {2}, dtype::f16);
  EXPECT_EQ(h.to_floats(q)[1], half_to_float(float_to_half(0.1f)));
}

// ---- targeted bad input -----------------------------------------------------------------------

op_call binary_call(queue& q, const tensor& a, const tensor& b, dims out_shape) {
  op_call c;
  c.op = "add";
  c.inputs = {a, b};
  c.outputs = {poisoned(q, out_shape, a.type())};
  return c;
}

TEST(bad_input, broadcast_mismatch) {
  queue& q = shared_queue();
  std::mt19937_64 rng(1);
  auto c = binary_call(q, random_tensor(q, {3, 4}, dtype::f32, rng), random_tensor(q, {5}, dtype::f32, rng),
                       {3, 4});
  expect_refused(q, op("add"), c, {"ops::add", "'input' [3, 4]", "'other' [5]", "broadcast"});
}

TEST(bad_input, dtype_mismatch) {
  queue& q = shared_queue();
  std::mt19937_64 rng(1);
  auto c =
      binary_call(q, random_tensor(q, {8}, dtype::f32, rng), random_tensor(q, {8}, dtype::f16, rng), {8});
  expect_refused(q, op("add"), c, {"ops::add", "'other'", "f16", "f32"});
}

TEST(bad_input, unsupported_dtype) {
  queue& q = shared_queue();
  std::mt19937_64 rng(1);
  op_call c;
  c.op = "exp";
  c.inputs = {random_tensor(q, {8}, dtype::i32, rng)};
  c.outputs = {poisoned(q, {8}, dtype::i32)};
  expect_refused(q, op("exp"), c, {"ops::exp", "'input'", "i32", "valid: f32, f16, bf16"});
}

TEST(bad_input, different_contexts) {
  queue& q = shared_queue();
  queue other(context(q.get_device()));  // a separate context on the same device
  std::mt19937_64 rng(1);
  auto c =
      binary_call(q, random_tensor(q, {8}, dtype::f32, rng), random_tensor(other, {8}, dtype::f32, rng), {8});
  expect_refused(q, op("add"), c, {"ops::add", "'other'", "context"});
}

TEST(bad_input, dim_out_of_range) {
  queue& q = shared_queue();
  std::mt19937_64 rng(1);
  op_call c;
  c.op = "sum";
  c.inputs = {random_tensor(q, {4, 5}, dtype::f32, rng)};
  c.set("dims", std::vector<std::int64_t>{2});
  c.outputs = {poisoned(q, {4}, dtype::f32)};
  expect_refused(q, op("sum"), c, {"ops::sum", "dims", "2", "[-2, 1]"});
  op_call s;
  s.op = "softmax";
  s.inputs = {random_tensor(q, {4, 5}, dtype::f32, rng)};
  s.set("dim", std::int64_t{-3});
  s.outputs = {poisoned(q, {4, 5}, dtype::f32)};
  expect_refused(q, op("softmax"), s, {"ops::softmax", "dim -3", "[-2, 1]"});
}

TEST(bad_input, non_contiguous_output) {
  queue& q = shared_queue();
  std::mt19937_64 rng(1);
  op_call c;
  c.op = "rms_norm";
  c.inputs = {random_tensor(q, {6, 8}, dtype::f32, rng), random_tensor(q, {8}, dtype::f32, rng)};
  c.outputs = {poisoned(q, {8, 6}, dtype::f32).transpose(0, 1)};
  expect_refused(q, op("rms_norm"), c, {"ops::rms_norm", "'out'", "contiguous"});
  op_call f;
  f.op = "fused_add_rms_norm";
  tensor res = poisoned(q, {8, 6}, dtype::f32).transpose(0, 1);
  f.inputs = {random_tensor(q, {6, 8}, dtype::f32, rng), res, tensor()};
  f.outputs = {poisoned(q, {6, 8}, dtype::f32), res};
  expect_refused(q, op("fused_add_rms_norm"), f, {"ops::fused_add_rms_norm", "'residual'", "contiguous"});
}

TEST(bad_input, shape_rules) {
  queue& q = shared_queue();
  std::mt19937_64 rng(1);
  op_call ln;
  ln.op = "layer_norm";
  ln.inputs = {random_tensor(q, {4, 16}, dtype::f32, rng), random_tensor(q, {15}, dtype::f32, rng), tensor()};
  ln.outputs = {poisoned(q, {4, 16}, dtype::f32)};
  expect_refused(q, op("layer_norm"), ln, {"ops::layer_norm", "'weight'", "[15]", "[16]"});
  op_call cat;
  cat.op = "cat";
  cat.set("dim", std::int64_t{0});
  cat.inputs = {random_tensor(q, {2, 3}, dtype::f32, rng), random_tensor(q, {2, 4}, dtype::f32, rng)};
  cat.outputs = {poisoned(q, {4, 3}, dtype::f32)};
  expect_refused(q, op("cat"), cat, {"ops::cat", "'tensors1'", "[2, 4]"});
  op_call wrong;
  wrong.op = "exp";
  wrong.inputs = {random_tensor(q, {4, 16}, dtype::f32, rng)};
  wrong.outputs = {poisoned(q, {4, 15}, dtype::f32)};
  expect_refused(q, op("exp"), wrong, {"ops::exp", "'out'", "[4, 15]", "expected f32[4, 16]"});
  op_call gate;
  gate.op = "silu_and_mul";
  gate.inputs = {random_tensor(q, {4, 7}, dtype::f32, rng)};
  gate.outputs = {poisoned(q, {4, 3}, dtype::f32)};
  expect_refused(q, op("silu_and_mul"), gate, {"ops::silu_and_mul", "even"});
}

TEST(bad_input, arity_and_attrs) {
  queue& q = shared_queue();
  std::mt19937_64 rng(1);
  op_call c;
  c.op = "add";
  c.inputs = {random_tensor(q, {4}, dtype::f32, rng)};
  c.outputs = {poisoned(q, {4}, dtype::f32)};
  expect_refused(q, op("add"), c, {"ops::add", "inputs", "input, other?"});
  op_call g;
  g.op = "gelu";
  g.inputs = {random_tensor(q, {4}, dtype::f32, rng)};
  g.set("approximate", std::string("fast"));
  g.outputs = {poisoned(q, {4}, dtype::f32)};
  expect_refused(q, op("gelu"), g, {"ops::gelu", "approximate", "none, tanh"});
  op_call a;
  a.op = "add";
  a.inputs = {random_tensor(q, {4}, dtype::f32, rng), tensor()};
  a.outputs = {poisoned(q, {4}, dtype::f32)};
  expect_refused(q, op("add"), a, {"ops::add", "scalar"});
}

TEST(bad_input, embedding_index_out_of_range) {
  queue& q = shared_queue();
  std::mt19937_64 rng(1);
  op_call c;
  c.op = "embedding";
  std::vector<float> idx = {1, 9, 2, -1};
  c.inputs = {random_tensor(q, {10, 4}, dtype::f32, rng),
              tensor::from_floats(q, std::vector<float>{1, 10, 2, 3}, {2, 2}, dtype::i64)};
  allocate_outputs(q, op("embedding"), c);
  try {
    enqueue_opencl(q, op("embedding"), c);
    FAIL() << "an index of 10 for 10 rows was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("indices[0, 1] = 10"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[0, 9]"), std::string::npos) << e.what();
  }
  // The in-range rows were still gathered and the bad row zeroed: no undefined contents.
  auto out = c.outputs[0].to_floats(q);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(out[4 + j], 0.0f);
}

TEST(bad_input, rope_positions_mismatch) {
  queue& q = shared_queue();
  std::mt19937_64 rng(1);
  op_call c;
  c.op = "rotary_embedding";
  tensor qt = random_tensor(q, {3, 2, 8}, dtype::f32, rng);
  c.inputs = {tensor::from_floats(q, std::vector<float>{0, 1}, {2}, dtype::i64), qt, tensor(),
              random_tensor(q, {16, 8}, dtype::f32, rng)};
  c.outputs = {qt, tensor()};
  expect_refused(q, op("rotary_embedding"), c, {"ops::rotary_embedding", "'positions'", "[2]", "[3, 2, 8]"});
}

}  // namespace
}  // namespace prism::test
