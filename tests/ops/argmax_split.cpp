// SPDX-License-Identifier: Apache-2.0
// argmax with several work-groups a row (config sg: reduce_rows_split, greedy decode's argmax over
// a vocabulary): each group takes a slice and the last to finish picks among the slices' winners,
// so the first maximum, the first NaN and a row of one value must come out whatever slice holds
// them, with slices past the row's end (more groups than the row needs) and twice in a row (the
// last group resets the row's counter for the next launch).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/op_descriptor.hpp"
#include "kernels/op_support.hpp"
#include "ops_test_util.hpp"

namespace prism::test {
namespace {

TEST(argmax, split_rows_keep_the_first_best) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("argmax");
  const std::int64_t n = 1031;
  auto row = [&](auto fill) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      v[static_cast<std::size_t>(i)] = std::sin(0.37f * static_cast<float>(i));
    fill(v);
    return v;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> rows = {
      row([](auto& v) { v[700] = v[701] = v[1030] = 5; }),            // ties in one slice and the last
      row([](auto& v) { v[3] = v[900] = 5; }),                        // ties in the first and a late slice
      row([&](auto& v) { v[500] = nan, v[600] = 9, v[800] = nan; }),  // the first NaN beats 9
      row([&](auto& v) { std::fill(v.begin(), v.end(), -inf); }),     // one value: index 0
      row([](auto& v) { v[1029] = 7; })};                             // in the row's scalar tail
  const std::vector<double> want = {700, 3, 500, 0, 1029};
  std::vector<float> all;
  for (const auto& r : rows) all.insert(all.end(), r.begin(), r.end());
  // 8 groups of 132 (wg 8, vec 4); 64 groups of 20, the last 12 past the row's end (wg 1); 4 groups
  // of scalar loads (vec 1).
  for (const char* cfg :
       {"variant=0,wg=8,vec=4,sg=16", "variant=0,wg=1,vec=4,sg=64", "variant=0,wg=32,vec=1,sg=4"})
    for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
      SCOPED_TRACE(std::string(cfg) + " " + dtype_name(t));
      op_call c;
      c.op = "argmax";
      c.set("dims", std::vector<std::int64_t>{1});
      c.inputs = {tensor::from_floats(q, all, {static_cast<std::int64_t>(rows.size()), n}, t)};
      allocate_outputs(q, d, c);
      for (int round = 0; round < 2; ++round) {
        run_and_compare(d, c, d.config.complete(kernel_config::parse(cfg)), false);
        EXPECT_EQ(read_host(q, c.outputs[0]).values, want) << "round " << round;
      }
    }
}

}  // namespace
}  // namespace prism::test
