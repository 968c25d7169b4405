// SPDX-License-Identifier: Apache-2.0
// cuBLAS FP32 SGEMM as a reference, loaded at run time with dlopen (no CUDA needed to build):
// present on NVIDIA machines with the CUDA runtime and cuBLAS installed, absent elsewhere.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace prism::bench {

/// y[m, n] = x[m, k] @ W[n, k]^T on the GPU, FP32 (default math mode: no TF32).
class cublas_linear {
 public:
  /// nullptr (with `why` set) when libcudart/libcublas cannot be loaded or initialised.
  static std::unique_ptr<cublas_linear> create(std::int64_t m, std::int64_t n, std::int64_t k,
                                               std::string& why);
  ~cublas_linear();
  /// One SGEMM, synchronised.
  void run();

  struct api;  ///< the resolved CUDA runtime + cuBLAS entry points

 private:
  cublas_linear() = default;
  const api* api_ = nullptr;
  void* handle_ = nullptr;
  float *x_ = nullptr, *w_ = nullptr, *y_ = nullptr;
  int m_ = 0, n_ = 0, k_ = 0;
};

}  // namespace prism::bench
