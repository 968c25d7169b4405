// SPDX-License-Identifier: Apache-2.0
// exp on 16-bit storage uses prelude.cl's prism_exp16 (a cheaper exp than the f32 builtin). The
// op suite samples exp on [-8, 8]; this test covers the whole range: results that round to f16
// and bf16 denormals or zero, overflow to inf, inf and NaN inputs, for exp and for sigmoid, whose
// exp(-x) overflows for large negative x. Expected values are the double result rounded to the
// storage type; the bound is one ulp of that type.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/op_descriptor.hpp"
#include "kernels/op_support.hpp"
#include "ops_test_util.hpp"

namespace prism::test {
namespace {

std::vector<float> full_range_inputs() {
  std::vector<float> v;
  for (double x = -110.0; x <= 95.0; x += 0.0371) v.push_back(static_cast<float>(x));
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 11.089f, 11.091f, 88.72f, 88.73f, -87.33f, -103.9f, -104.0f})
    v.push_back(x);
  v.push_back(std::numeric_limits<float>::infinity());
  v.push_back(-std::numeric_limits<float>::infinity());
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  return v;
}

void check_full_range(const char* op, dtype t, double (*ref)(double)) {
  queue& q = shared_queue();
  const op_descriptor& d = op_registry::instance().get(op);
  std::vector<float> in = full_range_inputs();
  const dims shape{static_cast<std::int64_t>(in.size())};
  op_call c;
  c.op = op;
  c.inputs = {tensor::from_floats(q, in, shape, t)};
  allocate_outputs(q, d, c);
  enqueue_opencl(q, d, c);
  std::vector<float> got = c.outputs[0].to_floats(q);
  // The exact results rounded to the storage type, through the same host conversion.
  std::vector<float> exact;
  for (float x : c.inputs[0].to_floats(q)) exact.push_back(static_cast<float>(ref(static_cast<double>(x))));
  std::vector<float> want = tensor::from_floats(q, exact, shape, t).to_floats(q);
  std::vector<float> x_st = c.inputs[0].to_floats(q);
  int bad = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const double w = want[i], g = got[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = !std::isnan(g) && std::fabs(g - w) <= ulp_of(t, w);
    if (!ok && ++bad <= 5)
      ADD_FAILURE() << op << " " << dtype_name(t) << "(" << x_st[i] << "): got " << g << ", want " << w
                    << " (1 ulp " << ulp_of(t, w) << ")";
  }
  EXPECT_EQ(bad, 0) << op << " " << dtype_name(t) << ": " << bad << " of " << in.size()
                    << " off by more than 1 ulp";
}

double exp_ref(double x) {
  return std::exp(x);
}
double sigmoid_ref(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

TEST(ops_unary, exp16_full_range) {
  check_full_range("exp", dtype::f16, exp_ref);
  check_full_range("exp", dtype::bf16, exp_ref);
}

TEST(ops_unary, sigmoid16_full_range) {
  check_full_range("sigmoid", dtype::f16, sigmoid_ref);
  check_full_range("sigmoid", dtype::bf16, sigmoid_ref);
}

}  // namespace
}  // namespace prism::test
