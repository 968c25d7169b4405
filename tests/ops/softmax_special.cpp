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
  tune_space space = load_tune_space(d, suite_vendor());
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

TEST(ops_softmax, special_rows_every_config) {
  check_every_config("softmax");
}

TEST(ops_softmax, log_special_rows_every_config) {
  check_every_config("log_softmax");
}

}  // namespace
}  // namespace prism::test
