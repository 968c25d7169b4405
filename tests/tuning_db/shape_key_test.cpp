// SPDX-License-Identifier: Apache-2.0
// shape_key parsing, canonical form and the nearest-shape distance.
#include <gtest/gtest.h>

#include <cmath>

#include "prism/error.hpp"
#include "prism/tuning_db.hpp"

using namespace prism::tuning;

TEST(ShapeKey, ParsesAndPrints) {
  auto k = shape_key::parse(" m=128, n=4096 ,k=4096");
  EXPECT_EQ(k.str(), "m=128,n=4096,k=4096");
  EXPECT_EQ(k.canonical(), "k=4096,m=128,n=4096");
  EXPECT_EQ(*k.find("n"), 4096);
  EXPECT_FALSE(k.find("x"));
  EXPECT_EQ(k, shape_key::parse("k=4096,n=4096,m=128"));
  EXPECT_TRUE(shape_key::parse("").empty());
}

TEST(ShapeKey, RejectsBadText) {
  for (const char* bad : {"m", "m=", "m=1x", "=3", "m=1,m=2", "m-1=2", "m=1,,n=2"}) {
    try {
      (void)shape_key::parse(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const prism::error& e) {
      EXPECT_EQ(e.code(), prism::errc::invalid_argument) << bad;
    }
  }
}

TEST(ShapeKey, DistanceIsSumOfLog2Ratios) {
  auto a = shape_key::parse("m=16,n=4096,k=4096");
  EXPECT_DOUBLE_EQ(shape_distance(a, a), 0.0);
  EXPECT_DOUBLE_EQ(shape_distance(a, shape_key::parse("m=32,n=4096,k=4096")), 1.0);
  EXPECT_DOUBLE_EQ(shape_distance(a, shape_key::parse("m=4,n=4096,k=8192")), 3.0);
  EXPECT_NEAR(shape_distance(a, shape_key::parse("m=16,n=11008,k=4096")), std::log2(11008.0 / 4096.0), 1e-12);
  // Different component names, or differing zero/flag components: not comparable.
  EXPECT_TRUE(std::isinf(shape_distance(a, shape_key::parse("m=16,n=4096"))));
  EXPECT_TRUE(std::isinf(shape_distance(a, shape_key::parse("m=16,n=4096,x=4096"))));
  EXPECT_TRUE(std::isinf(shape_distance(shape_key::parse("m=2,causal=0"), shape_key::parse("m=2,causal=1"))));
  EXPECT_DOUBLE_EQ(shape_distance(shape_key::parse("m=2,causal=0"), shape_key::parse("m=4,causal=0")), 1.0);
}

TEST(ShapeKey, BucketIsLog2PerComponentAndOrderFree) {
  auto a = shape_key::parse("m=16,n=4096,k=4096,causal=0,b=1");
  EXPECT_EQ(a.bucket(), "b=1,causal=0,k~12,m~4,n~12");
  EXPECT_EQ(a.bucket(), shape_key::parse("causal=0,b=1,k=8191,n=5000,m=31").bucket());
  EXPECT_NE(a.bucket(), shape_key::parse("m=32,n=4096,k=4096,causal=0,b=1").bucket());
  EXPECT_NE(a.bucket(), shape_key::parse("m=16,n=4096,k=4096,causal=1,b=1").bucket());
  EXPECT_NE(a.bucket(), shape_key::parse("m=16,n=4096,k=4096,causal=0,b=2").bucket());
  // One bucket means less than 1 apart in every component of shape_distance.
  for (std::int64_t m = 2; m < 300; ++m)
    for (std::int64_t m2 = 2; m2 < 300; ++m2) {
      const auto x = shape_key::parse("m=" + std::to_string(m)),
                 y = shape_key::parse("m=" + std::to_string(m2));
      if (x.bucket() == y.bucket()) EXPECT_LT(shape_distance(x, y), 1.0) << m << " " << m2;
    }
}
