// A GEMM family call (mm, bmm, addmm, linear) as BLAS sees it: row-major C[b] = alpha * op(A[b])
// op(B[b]) + beta * C[b], with each operand's transpose flag, leading dimension, element offset
// and batch stride read from the tensors' strides (transposed views cost no copy).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "kernels/op_descriptor.hpp"

namespace prism::dispatch {

struct blas_operand {
  const tensor* t = nullptr;
  bool trans = false;       ///< the tensor holds op(X)^T row-major
  std::int64_t ld = 0;      ///< leading dimension (elements)
  std::int64_t offset = 0;  ///< first element
  std::int64_t batch_stride = 0;
};

struct gemm_problem {
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
  blas_operand a, b, c;
  const tensor* bias = nullptr;  ///< addmm / linear: added (times beta) before the product
  dtype type = dtype::f32;
};

/// The problem of a GEMM family call, or why BLAS cannot take its layout (e.g. an operand with
/// no unit stride, or an output that is not row-major). The call must have passed check_call.
std::variant<gemm_problem, std::string> make_gemm_problem(const op_call& call);

}  // namespace prism::dispatch
