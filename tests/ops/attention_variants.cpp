// SPDX-License-Identifier: Apache-2.0
// scaled_dot_product_attention's GPU variants on whatever device runs the suite, for every dtype
// and every test case of the descriptor:
// - variant 2 (tiled flash attention, attention_tiled.cl) runs everywhere, so CI's CPU device
//   checks its structure: query tiles taken last-first, partial query and key tiles, the causal
//   offset of a KV cache, GQA, masks on top of the tiles, and the row-group reductions (the
//   local-memory pass here, inline-PTX shuffles on NVIDIA). The one case it refuses (head_dim 1)
//   names the reason.
// - variants 3 and 4 (tensor cores through inline PTX: attention_mma.cl for 16-bit dtypes,
//   attention_tf32x3.cl for f32) run on NVIDIA; elsewhere the
//   test checks that it is refused with the probe's reason.
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/op_descriptor.hpp"
#include "ops_test_util.hpp"

namespace prism::test {
namespace {

const op_implementation& impl_named(const op_descriptor& d, const std::string& name) {
  for (const auto& impl : d.implementations)
    if (impl.name == name) return impl;
  throw std::runtime_error("scaled_dot_product_attention has no " + name + " implementation");
}
const op_implementation& tiled(const op_descriptor& d) {
  return impl_named(d, "opencl.tiled");
}
const op_implementation& mma(const op_descriptor& d) {
  return impl_named(d, "opencl.mma");
}
const op_implementation& tf32x3(const op_descriptor& d) {
  return impl_named(d, "opencl.tf32x3");
}

// Every test case of each dtype with each config through `impl`; a refused call's reason goes
// to `refusal`. Returns {ran, refused}.
std::pair<int, int> sweep_cases(const op_implementation& impl, std::initializer_list<dtype> dtypes,
                                std::initializer_list<const char*> configs, std::uint64_t seed,
                                const std::function<void(const std::string&)>& refusal) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  int ran = 0, refused = 0;
  for (dtype t : dtypes)
    for (const auto& tc : d.test_cases(t))
      for (const char* text : configs) {
        sample_options o;
        o.type = t;
        o.seed = seed;
        op_call c = tc.make(q, o);
        const kernel_config cfg = d.config.complete(kernel_config::parse(text));
        SCOPED_TRACE(tc.shape_class + " " + dtype_name(t) + " " + text);
        if (auto why = impl.supports(q.get_device(), c, cfg)) {
          refusal(*why);
          ++refused;
          continue;
        }
        run_and_compare(d, c, cfg, false);
        ++ran;
      }
  return {ran, refused};
}

// Shapes (with their configs) through `impl` in each dtype; the number run. With `all`, every
// one must be taken; otherwise refused ones are skipped (a device without the PTX forms).
int walk_shapes(const op_implementation& impl, std::initializer_list<dtype> dtypes,
                const std::vector<std::pair<const char*, const char*>>& cases, std::uint64_t seed, bool all) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  int ran = 0;
  for (dtype t : dtypes)
    for (const auto& [shape, text] : cases) {
      SCOPED_TRACE(std::string(shape) + " " + dtype_name(t) + " " + text);
      sample_options o;
      o.type = t;
      o.seed = seed;
      op_call c = d.sample(q, shape_key::parse(shape), o);
      const kernel_config cfg = d.config.complete(kernel_config::parse(text));
      if (auto why = impl.supports(q.get_device(), c, cfg)) {
        EXPECT_FALSE(all) << *why;
        continue;
      }
      run_and_compare(d, c, cfg, false);
      ++ran;
    }
  return ran;
}

// Off NVIDIA's platform the tensor-core variants are refused with the probe's reason.
void expect_ptx_refusal(const std::string& why) {
  if (shared_queue().get_device().platform_name().find("NVIDIA") == std::string::npos)
    EXPECT_NE(why.find("inline PTX needs NVIDIA's OpenCL platform"), std::string::npos) << why;
}

TEST(attention_variants, tiled_matches_the_reference_in_every_dtype) {
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  auto [ran, refused] = sweep_cases(tiled(d), {dtype::f32, dtype::f16, dtype::bf16}, {"variant=2,bq=16,bk=8"},
                                    13, [](const std::string& why) {
                                      EXPECT_NE(why.find("must be multiples of 4"), std::string::npos) << why;
                                    });
  EXPECT_EQ(refused, 3);  // the d = 1 case, in each dtype
  EXPECT_GE(ran, 27);
}

// Several query and key tiles, each partial at the end; a KV-cache offset (lk > lq) under
// causal masking, so the first rows see most keys; GQA with a value dim other than head_dim; a
// padding mask together with causal masking; the largest tiles.
TEST(attention_variants, tiled_walks_many_tiles) {
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  EXPECT_EQ(walk_shapes(tiled(d), {dtype::f32},
                        {{"b=1,hq=4,hkv=2,lq=70,lk=101,d=40,dv=24,causal=1,mask=0", "variant=2,bq=32,bk=16"},
                         {"b=2,hq=2,hkv=1,lq=45,lk=45,d=16,causal=1,mask=4", "variant=2,bq=16,bk=8"},
                         {"b=1,hq=2,hkv=2,lq=130,lk=80,d=32,causal=0,mask=2", "variant=2,bq=64,bk=32"}},
                        7, true),
            3);
}

// Every test case in f16 and bf16 with two and four warps a work-group; the cases whose head_dim
// is not a multiple of 16 (or whose strided views leave 16-byte rows) are refused with the reason.
TEST(attention_variants, mma_matches_the_reference_in_16_bit_dtypes) {
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  auto [ran, refused] =
      sweep_cases(mma(d), {dtype::f16, dtype::bf16},
                  {"variant=3,bq=32,bk=16", "variant=3,bq=64,bk=32,stages=2"}, 17, expect_ptx_refusal);
  if (ran == 0)
    GTEST_SKIP() << "variant 3 needs NVIDIA's inline PTX (mma, ldmatrix, shfl); refused " << refused;
  // d = 64 (large), d = 16 (broadcast x2, padding x2, strided) and d = 24 / 8 / 1 refused.
  EXPECT_GE(ran, 2 * 2 * 5);
}

// Several query and key tiles, partial at the end, the causal offset of a KV cache and GQA with
// a value dim other than head_dim; a padding mask with causal masking; the largest tiles.
TEST(attention_variants, mma_walks_many_tiles) {
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  const int ran = walk_shapes(
      mma(d), {dtype::bf16, dtype::f16},
      {{"b=1,hq=4,hkv=2,lq=70,lk=150,d=128,dv=64,causal=1,mask=0", "variant=3,bq=32,bk=32,stages=2"},
       {"b=2,hq=2,hkv=1,lq=45,lk=45,d=32,causal=1,mask=4", "variant=3,bq=64,bk=16"},
       {"b=1,hq=2,hkv=2,lq=200,lk=130,d=64,causal=0,mask=2", "variant=3,bq=128,bk=32"}},
      9, false);
  if (ran == 0) GTEST_SKIP() << "variant 3 needs NVIDIA's inline PTX";
  EXPECT_EQ(ran, 6);
}

// Variant 4 (f32 through 3xTF32 products) against the f32 tolerance, every test case with two
// and four warps; head dims that are not multiples of 8 (d = 1, the strided case's value dim 12)
// are refused with the reason. Then several tiles with a KV-cache offset and GQA, a padding mask
// with causal masking, the largest tiles with a boolean mask.
TEST(attention_variants, tf32x3_matches_the_f32_reference) {
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  auto [ran, refused] =
      sweep_cases(tf32x3(d), {dtype::f32}, {"variant=4,bq=32,bk=8", "variant=4,bq=64,bk=16,stages=2"}, 19,
                  expect_ptx_refusal);
  if (ran == 0) GTEST_SKIP() << "variant 4 needs NVIDIA's inline PTX (mma tf32, shfl); refused " << refused;
  EXPECT_EQ(refused, 2 * 2);  // d = 1 and the value dim 12, with each config
  EXPECT_EQ(
      walk_shapes(tf32x3(d), {dtype::f32},
                  {{"b=1,hq=4,hkv=2,lq=70,lk=150,d=128,dv=64,causal=1,mask=0", "variant=4,bq=32,bk=32"},
                   {"b=2,hq=2,hkv=1,lq=45,lk=45,d=32,causal=1,mask=4", "variant=4,bq=64,bk=8,stages=2"},
                   {"b=1,hq=2,hkv=2,lq=200,lk=130,d=64,causal=0,mask=2", "variant=4,bq=128,bk=16,stages=2"}},
                  23, true),
      3);
}

// Scores that keep growing along the keys (K row j = 0.05 j plus noise, Q around 0.5): each row's
// max passes the running one by more than the tensor-core kernels' rescale slack (2^8) several
// times, so a skipped or wrong accumulator rescale shows. Every variant that runs here, in the
// dtypes it takes.
TEST(attention_variants, growing_scores_rescale_the_accumulators) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  struct run {
    const op_implementation* impl;
    const char* config;
    dtype type;
  };
  const std::vector<run> runs = {{&tiled(d), "variant=2,bq=32,bk=16", dtype::f32},
                                 {&tiled(d), "variant=2,bq=32,bk=16", dtype::bf16},
                                 {&mma(d), "variant=3,bq=64,bk=64", dtype::bf16},
                                 {&mma(d), "variant=3,bq=32,bk=32,stages=2", dtype::bf16},
                                 {&tf32x3(d), "variant=4,bq=64,bk=16,stages=2", dtype::f32},
                                 {&tf32x3(d), "variant=4,bq=32,bk=32", dtype::f32}};
  int ran = 0;
  for (const auto& [impl, text, t] : runs) {
    SCOPED_TRACE(std::string(text) + " " + dtype_name(t));
    sample_options o;
    o.type = t;
    o.seed = 31;
    op_call c = d.sample(q, shape_key::parse("b=1,hq=2,hkv=1,lq=40,lk=300,d=32,causal=1,mask=0"), o);
    std::vector<float> qv = c.inputs[0].to_floats(q), kv = c.inputs[1].to_floats(q);
    for (auto& x : qv) x = 0.5f + 0.05f * x;
    for (std::size_t i = 0; i < kv.size(); ++i)
      kv[i] = 0.05f * static_cast<float>(i / 32 % 300) + 0.05f * kv[i];
    c.inputs[0] = tensor::from_floats(q, qv, c.inputs[0].shape(), t);
    c.inputs[1] = tensor::from_floats(q, kv, c.inputs[1].shape(), t);
    const kernel_config cfg = d.config.complete(kernel_config::parse(text));
    if (auto why = impl->supports(q.get_device(), c, cfg)) {
      expect_ptx_refusal(*why);
      continue;
    }
    run_and_compare(d, c, cfg, false);
    ++ran;
  }
  EXPECT_GE(ran, 2);  // variant 2 runs on every device
}

// Bad configs name what is valid.
TEST(attention_variants, tiled_configs_outside_its_tiles_are_refused) {
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  auto why = d.config.validate(kernel_config::parse("variant=2,bq=128,bk=16"));
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("variant 2 takes bq 16, 32 or 64"), std::string::npos) << *why;
  why = d.config.validate(kernel_config::parse("variant=2,bq=32,bk=4"));
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("variant 2 takes bk 8, 16 or 32"), std::string::npos) << *why;
  why = d.config.validate(kernel_config::parse("variant=3,bq=16,bk=32"));
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("variant 3 takes bq 32, 64 or 128"), std::string::npos) << *why;
  why = d.config.validate(kernel_config::parse("variant=2,bq=32,bk=16,stages=2"));
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("stages=2 (cp.async double buffering) is variants 3 and 4's"), std::string::npos)
      << *why;
  EXPECT_FALSE(d.config.validate(kernel_config::parse("variant=0,bq=128,bk=4")).has_value());
  // f32 is not a tensor-core dtype here (TF32 would be opt-in): the reason says what runs.
  queue& q = shared_queue();
  sample_options o;
  op_call c = d.sample(q, shape_key::parse("b=1,hq=2,hkv=2,lq=16,lk=16,d=16,causal=1,mask=0"), o);
  why = mma(d).supports(q.get_device(), c, d.config.complete(kernel_config::parse("variant=3,bq=64,bk=32")));
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("variant 3 runs f16 and bf16 on tensor cores, not f32"), std::string::npos) << *why;
  why = d.config.validate(kernel_config::parse("variant=4,bq=64,bk=64"));
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("variant 4 takes bk 8, 16 or 32"), std::string::npos) << *why;
}

}  // namespace
}  // namespace prism::test
