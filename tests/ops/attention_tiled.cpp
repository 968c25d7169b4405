// SPDX-License-Identifier: Apache-2.0
// scaled_dot_product_attention's tiled GPU variant (variant 2, attention_tiled.cl) on whatever
// device runs the suite, for every dtype and every test case of the descriptor, so that CI's CPU
// device checks its structure: query tiles taken last-first, partial query and key tiles, the
// causal offset of a KV cache, GQA, masks on top of the tiles, and the row-group reductions (the
// local-memory pass here, inline-PTX shuffles on NVIDIA). The one case it refuses (head_dim 1)
// names the reason.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "kernels/op_descriptor.hpp"
#include "ops_test_util.hpp"

namespace prism::test {
namespace {

const op_implementation& tiled(const op_descriptor& d) {
  for (const auto& impl : d.implementations)
    if (impl.name == "opencl.tiled") return impl;
  throw std::runtime_error("scaled_dot_product_attention has no opencl.tiled implementation");
}

TEST(attention_variants, tiled_matches_the_reference_in_every_dtype) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  const kernel_config cfg = kernel_config::parse("variant=2,bq=16,bk=8");
  int ran = 0, refused = 0;
  for (dtype t : d.dtypes) {
    for (const auto& tc : d.test_cases(t)) {
      sample_options o;
      o.type = t;
      o.seed = 13;
      op_call c = tc.make(q, o);
      SCOPED_TRACE(tc.shape_class + " " + dtype_name(t));
      if (auto why = tiled(d).supports(q.get_device(), c, cfg)) {
        EXPECT_NE(why->find("must be multiples of 4"), std::string::npos) << *why;
        ++refused;
        continue;
      }
      run_and_compare(d, c, cfg, false);
      ++ran;
    }
  }
  EXPECT_EQ(refused, 3);  // the d = 1 case, in each dtype
  EXPECT_GE(ran, 27);
}

// Several query and key tiles, each partial at the end; a KV-cache offset (lk > lq) under
// causal masking, so the first rows see most keys; GQA with a value dim other than head_dim; a
// padding mask together with causal masking; the largest tiles.
TEST(attention_variants, tiled_walks_many_tiles) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("scaled_dot_product_attention");
  const std::pair<const char*, const char*> cases[] = {
      {"b=1,hq=4,hkv=2,lq=70,lk=101,d=40,dv=24,causal=1,mask=0", "variant=2,bq=32,bk=16"},
      {"b=2,hq=2,hkv=1,lq=45,lk=45,d=16,causal=1,mask=4", "variant=2,bq=16,bk=8"},
      {"b=1,hq=2,hkv=2,lq=130,lk=80,d=32,causal=0,mask=2", "variant=2,bq=64,bk=32"},
  };
  for (const auto& [shape, text] : cases) {
    SCOPED_TRACE(std::string(shape) + " " + text);
    sample_options o;
    o.type = dtype::f32;
    o.seed = 7;
    op_call c = d.sample(q, shape_key::parse(shape), o);
    const kernel_config cfg = kernel_config::parse(text);
    ASSERT_FALSE(tiled(d).supports(q.get_device(), c, cfg).has_value());
    run_and_compare(d, c, cfg, false);
  }
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
  EXPECT_FALSE(d.config.validate(kernel_config::parse("variant=0,bq=128,bk=4")).has_value());
}

}  // namespace
}  // namespace prism::test
