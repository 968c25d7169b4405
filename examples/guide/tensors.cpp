// SPDX-License-Identifier: Apache-2.0
// Guide, part 1: tensors, views, dtypes, upload and download (docs/guide.md quotes the marked
// parts of this file; CTest runs it).
#include <prism/ops.hpp>
#include <prism/runtime.hpp>
#include <prism/tensor.hpp>

#include "guide_check.hpp"

int main() {
  // [create]
  prism::queue q;  // the default device: PRISM_DEVICE, else a GPU, else a CPU
  std::vector<float> host = {1, 2, 3, 4, 5, 6};
  prism::tensor x = prism::tensor::from_floats(q, host, {2, 3}, prism::dtype::f32);
  std::printf("%s on %s\n", x.str().c_str(), q.get_device().name().c_str());
  // [create]
  expect_values("upload and download", x.to_floats(q), {1, 2, 3, 4, 5, 6});

  // [views]
  prism::tensor t = x.transpose(0, 1);       // [3, 2], strides [1, 3]: no copy
  prism::tensor row = x.select(0, 1);        // [3]: the second row
  prism::tensor cols = x.slice(1, 0, 3, 2);  // [2, 2]: columns 0 and 2
  prism::tensor flat = x.reshape({6});       // contiguous, so a view too
  bool shared = t.same_storage(x) && row.same_storage(x) && flat.same_storage(x);
  prism::tensor packed = prism::ops::contiguous(q, t);  // a copy in row-major order
  // [views]
  if (!shared || t.is_contiguous() || !packed.is_contiguous()) return 1;
  expect_values("transpose", t.to_floats(q), {1, 4, 2, 5, 3, 6});
  expect_values("select", row.to_floats(q), {4, 5, 6});
  expect_values("strided slice", cols.to_floats(q), {1, 3, 4, 6});
  expect_values("contiguous copy", packed.to_floats(q), {1, 4, 2, 5, 3, 6});

  // [dtypes]
  prism::tensor h = prism::ops::cast(q, x, prism::dtype::bf16);  // RNE to bfloat16
  std::vector<std::byte> raw = h.to_host(q);                     // storage format: 2 bytes each
  std::vector<float> back = h.to_floats(q);                      // converted to f32
  prism::tensor ids = prism::ops::arange(q, 4.0, prism::dtype::i64);
  // [dtypes]
  if (raw.size() != 12 || h.nbytes() != 12) return 1;
  expect_values("bf16 round trip", back, {1, 2, 3, 4, 5, 6});
  expect_values("arange", ids.to_floats(q), {0, 1, 2, 3});

  // [write]
  prism::tensor y = prism::ops::zeros(q, {2, 3});
  prism::tensor second_col = y.select(1, 1);                       // a strided view into y
  prism::ops::copy(q, second_col, prism::ops::full(q, {1}, 7.0));  // broadcast into the view
  prism::tensor corner = y.slice(0, 0, 1).slice(1, 0, 1);          // y[0:1, 0:1]
  prism::ops::copy(q, corner, x.slice(0, 0, 1).slice(1, 2, 3));    // = x[0:1, 2:3]
  // [write]
  expect_values("writes through views", y.to_floats(q), {3, 7, 0, 0, 7, 0});
  return 0;
}
