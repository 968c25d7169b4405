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
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Each row a ramp that stays below 1 (index i at i / n), with the planted values on top.
  std::vector<float> all;
  auto add_row = [&](std::initializer_list<std::pair<std::int64_t, float>> planted, float fill = NAN) {
    const std::size_t at = all.size();
    for (std::int64_t i = 0; i < n; ++i)
      all.push_back(std::isnan(fill) ? static_cast<float>(i) / static_cast<float>(n) : fill);
    for (const auto& [i, v] : planted) all[at + static_cast<std::size_t>(i)] = v;
  };
  add_row({{700, 5}, {701, 5}, {1030, 5}});     // ties in one slice and in the last
  add_row({{3, 5}, {900, 5}});                  // ties in the first and a late slice
  add_row({{500, nan}, {600, 9}, {800, nan}});  // the first NaN beats 9
  add_row({}, -inf);                            // one value: index 0
  add_row({{1029, 7}});                         // in the row's scalar tail
  const std::int64_t rows = 5;
  const std::vector<double> want = {700, 3, 500, 0, 1029};
  // 8 groups of 132 (wg 8, vec 4); 64 groups of 20, the last 12 past the row's end (wg 1); 4 groups
  // of scalar loads (vec 1).
  for (const char* cfg :
       {"variant=0,wg=8,vec=4,sg=16", "variant=0,wg=1,vec=4,sg=64", "variant=0,wg=32,vec=1,sg=4"})
    for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
      SCOPED_TRACE(std::string(cfg) + " " + dtype_name(t));
      op_call c;
      c.op = "argmax";
      c.set("dims", std::vector<std::int64_t>{1});
      c.inputs = {tensor::from_floats(q, all, {rows, n}, t)};
      allocate_outputs(q, d, c);
      for (int round = 0; round < 2; ++round) {
        run_and_compare(d, c, d.config.complete(kernel_config::parse(cfg)), false);
        EXPECT_EQ(read_host(q, c.outputs[0]).values, want) << "round " << round;
      }
    }
}

}  // namespace
}  // namespace prism::test
