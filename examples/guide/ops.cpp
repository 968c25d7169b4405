// SPDX-License-Identifier: Apache-2.0
// Guide, part 2: ops and errors (docs/guide.md quotes the marked parts; CTest runs it).
#include <prism/error.hpp>
#include <prism/ops.hpp>
#include <prism/runtime.hpp>

#include "guide_check.hpp"

int main() {
  prism::queue q;
  auto from = [&](std::vector<float> v, prism::dims shape) {
    return prism::tensor::from_floats(q, v, shape, prism::dtype::f32);
  };
  // [ops]
  prism::tensor x = from({1, 2, 3, 4}, {2, 2});
  prism::tensor w = from({1, 0, 0, 1, 1, 1}, {3, 2});  // [out, in], as in PyTorch
  prism::tensor b = from({0.5, 0, -1}, {3});
  prism::tensor y = prism::ops::linear(q, x, w, b);  // x @ w^T + b: [2, 3]
  prism::tensor p = prism::ops::softmax(q, y, -1);   // along the last dim
  prism::tensor s = prism::ops::sum(q, p, {1});      // [2]: each row sums to 1
  prism::tensor z = prism::ops::add(q, y, 1.0);      // broadcasting scalar
  // [ops]
  expect_values("linear", y.to_floats(q), {1.5, 2, 2, 3.5, 4, 6});
  expect_values("softmax rows", s.to_floats(q), {1, 1});
  expect_values("add", z.to_floats(q), {2.5, 3, 3, 4.5, 5, 7});

  // [errors]
  try {
    prism::ops::mm(q, x, w);  // [2, 2] @ [3, 2]: inner sizes differ
    return 1;
  } catch (const prism::error& e) {
    // e.code() is prism::errc::invalid_argument; e.what() names the op and the shapes.
    std::printf("caught: %s (%s)\n", e.what(), prism::errc_name(e.code()));
    if (e.code() != prism::errc::invalid_argument) return 1;
  }
  // [errors]
  return 0;
}
