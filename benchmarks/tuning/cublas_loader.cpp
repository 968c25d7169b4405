// SPDX-License-Identifier: Apache-2.0
// dlopen-based cuBLAS SGEMM reference for the tuning benchmark (see cublas_loader.hpp).
#include "benchmarks/tuning/cublas_loader.hpp"

#include <dlfcn.h>

#include <random>
#include <vector>

namespace prism::bench {

struct cublas_linear::api {
  int (*cuda_malloc)(void**, std::size_t) = nullptr;
  int (*cuda_free)(void*) = nullptr;
  int (*cuda_memcpy)(void*, const void*, std::size_t, int) = nullptr;
  int (*cuda_sync)() = nullptr;
  int (*create)(void**) = nullptr;
  int (*destroy)(void*) = nullptr;
  int (*sgemm)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
               const float*, float*, int) = nullptr;
};

namespace {

void* open_first(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (void* h = dlopen(n, RTLD_NOW | RTLD_GLOBAL)) return h;
  return nullptr;
}

template <class F>
bool bind(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

const cublas_linear::api* load(std::string& why) {
  static cublas_linear::api* loaded = nullptr;
  static std::string error;
  static bool tried = false;
  if (tried) {
    why = error;
    return loaded;
  }
  tried = true;
  void* rt = open_first({"libcudart.so", "libcudart.so.12", "libcudart.so.11.0"});
  void* bl = open_first({"libcublas.so", "libcublas.so.12", "libcublas.so.11"});
  if (!rt || !bl) {
    error = "libcudart/libcublas not found";
    why = error;
    return nullptr;
  }
  auto* a = new cublas_linear::api;
  bool ok = bind(rt, "cudaMalloc", a->cuda_malloc) && bind(rt, "cudaFree", a->cuda_free) &&
            bind(rt, "cudaMemcpy", a->cuda_memcpy) && bind(rt, "cudaDeviceSynchronize", a->cuda_sync) &&
            bind(bl, "cublasCreate_v2", a->create) && bind(bl, "cublasDestroy_v2", a->destroy) &&
            bind(bl, "cublasSgemm_v2", a->sgemm);
  if (!ok) {
    error = "a CUDA runtime or cuBLAS symbol is missing";
    why = error;
    return nullptr;
  }
  loaded = a;
  return loaded;
}

}  // namespace

std::unique_ptr<cublas_linear> cublas_linear::create(std::int64_t m, std::int64_t n, std::int64_t k,
                                                     std::string& why) {
  const api* a = load(why);
  if (!a) return nullptr;
  std::unique_ptr<cublas_linear> g(new cublas_linear);
  g->api_ = a;
  g->m_ = static_cast<int>(m);
  g->n_ = static_cast<int>(n);
  g->k_ = static_cast<int>(k);
  if (a->create(&g->handle_) != 0) {
    why = "cublasCreate failed";
    return nullptr;
  }
  auto alloc = [&](float*& p, std::int64_t count) {
    return a->cuda_malloc(reinterpret_cast<void**>(&p), static_cast<std::size_t>(count) * sizeof(float)) == 0;
  };
  if (!alloc(g->x_, m * k) || !alloc(g->w_, n * k) || !alloc(g->y_, m * n)) {
    why = "cudaMalloc failed";
    return nullptr;
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> host(static_cast<std::size_t>(std::max(m * k, n * k)));
  for (auto& v : host) v = dist(rng);
  constexpr int host_to_device = 1;
  a->cuda_memcpy(g->x_, host.data(), static_cast<std::size_t>(m * k) * sizeof(float), host_to_device);
  a->cuda_memcpy(g->w_, host.data(), static_cast<std::size_t>(n * k) * sizeof(float), host_to_device);
  a->cuda_sync();
  return g;
}

cublas_linear::~cublas_linear() {
  if (!api_) return;
  if (x_) api_->cuda_free(x_);
  if (w_) api_->cuda_free(w_);
  if (y_) api_->cuda_free(y_);
  if (handle_) api_->destroy(handle_);
}

void cublas_linear::run() {
  // Column-major view of the row-major problem: y^T[n, m] = W[n, k] (as W^T col-major) * x^T.
  const float alpha = 1.f, beta = 0.f;
  constexpr int op_n = 0, op_t = 1;
  api_->sgemm(handle_, op_t, op_n, n_, m_, k_, &alpha, w_, k_, x_, k_, &beta, y_, n_);
  api_->cuda_sync();
}

}  // namespace prism::bench
