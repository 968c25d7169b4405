// SPDX-License-Identifier: Apache-2.0
// softmax / log_softmax over rows that hold NaN, +inf and -inf, in a batch long enough that the
// row-block kernel (softmax.cl, softmax_row_block: one work-item pipelines several consecutive
// rows) meets them in the middle of a block, and with a row length that leaves a vector tail.
// Expected values are the descriptor's double reference, as in PyTorch: a NaN or +inf anywhere
// in a row makes the whole row NaN, an all -inf row is NaN, and -inf entries give 0 (-inf for
// log_softmax). Every config of the device's search space runs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/op_descriptor.hpp"
#include "kernels/op_support.hpp"
#include "ops_test_util.hpp"

namespace prism::test {
namespace {

constexpr std::int64_t kRows = 300, kCols = 37;

std::vector<float> special_rows() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-6.0f, 6.0f);
  std::vector<float> v(kRows * kCols);
  for (auto& x : v) x = u(rng);
  auto row = [&](std::int64_t r) { return v.begin() + r * kCols; };
  row(5)[3] = nan;                                               // one NaN
  std::fill(row(6), row(6) + kCols, -inf);                       // all -inf
  row(7)[kCols - 1] = inf;                                       // +inf in the vector tail
  for (std::int64_t j = 0; j < kCols; j += 2) row(8)[j] = -inf;  // half -inf: those give 0
  row(150)[36] = nan;                                            // NaN in the tail
  row(151)[0] = 80.0f;                                           // a large max; the rest underflow to 0
  std::fill(row(kRows - 1), row(kRows - 1) + kCols, -inf);
  return v;
}

void check_every_config(const char* op) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get(op);
  const std::vector<float> in = special_rows();
  tune_space space = suite_space(d);
  std::vector<kernel_config> configs = space.configs;
  configs.insert(configs.begin(), space.defaults);
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16}) {
    for (const auto& cfg : configs) {
      op_call c;
      c.op = op;
      c.set("dim", std::int64_t{-1});
      c.inputs = {tensor::from_floats(q, in, {kRows, kCols}, t)};
      allocate_outputs(q, d, c);
      run_and_compare(d, c, cfg, false);
    }
  }
}

// exp(x - max) over its whole domain, in the vector body and in the tail of a row: rows of 17
// with 0 first and d = x - max in every other element, d from -104 (results below the smallest
// denormal) to 0. y = e^d / (1 + 16 e^d); the bound is 6 f32 ulps (exp: prism_expn on CPUs,
// 1.05 ulp, the builtin elsewhere; the reciprocal and the product) plus 18 u |y| for the f32
// sum, whose small terms round away next to the 1 (d < -17). A coarse exp (e.g. the 16-bit one,
// 2^-13.6) or a wrong power-of-two factor is off by thousands of ulps.
TEST(ops_softmax, f32_exp_over_its_domain) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get("softmax");
  constexpr std::int64_t cols = 17;
  std::vector<float> in, want;
  for (double x = -104.0; x <= 0.0; x += 0.01373) {
    const float xf = static_cast<float>(x);
    in.push_back(0.0f);
    in.insert(in.end(), cols - 1, xf);
    const double e = std::exp(static_cast<double>(xf)), s = 1.0 + 16.0 * e;
    want.push_back(static_cast<float>(1.0 / s));
    want.insert(want.end(), cols - 1, static_cast<float>(e / s));
  }
  const std::int64_t rows = static_cast<std::int64_t>(in.size()) / cols;
  op_call c;
  c.op = "softmax";
  c.set("dim", std::int64_t{-1});
  c.inputs = {tensor::from_floats(q, in, {rows, cols}, dtype::f32)};
  allocate_outputs(q, d, c);
  enqueue_opencl(q, d, c, suite_space(d).defaults);
  const std::vector<float> got = c.outputs[0].to_floats(q);
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = 6 * ulp_of(dtype::f32, want[i]) + 18 * std::ldexp(std::fabs(want[i]), -24);
    if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= bound) && ++bad <= 5)
      ADD_FAILURE() << "softmax row " << i / cols << " (x - max = " << in[i - i % cols + 1] << ") element "
                    << i % cols << ": got " << got[i] << ", want " << want[i] << " (bound " << bound << ")";
  }
  EXPECT_EQ(bad, 0) << bad << " of " << got.size() << " elements over the bound";
}

TEST(ops_softmax, special_rows_every_config) {
  check_every_config("softmax");
}

TEST(ops_softmax, log_special_rows_every_config) {
  check_every_config("log_softmax");
}

}  // namespace
}  // namespace prism::test
