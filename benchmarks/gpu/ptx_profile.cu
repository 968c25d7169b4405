// SPDX-License-Identifier: Apache-2.0
// ptx_profile: an OpenCL-built kernel under Nsight Compute. NVIDIA's profilers see CUDA launches
// only, so this loads the PTX that NVIDIA's OpenCL produced for gemm_quant.cl's M = 1 GEMV
// (gemm_q_blocks_i8 built with QL_K and no norm: bf16 activations, prism's qp=3 route; written by
// PRISM_DUMP_PROGRAMS) through the CUDA driver API and launches it as prism would, its weights
// streamed from copies spanning 200 MB (past the L2), beside a plain 16-byte read of the same
// bytes. Not part of the CMake build: ptx_profile_run.sh compiles it with the CUDA toolkit on the
// GPU machine and runs it bare and under ncu.
//
// ptx_profile PTX QBYTES N K NB WARPS CALLS
//   QBYTES: 34 (q8_0), 18 (q4_0), 20 (q4_1); NB, WARPS: the config's nb and warps; CALLS: launches
//   a timed round (three rounds each, CUDA events).
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

__global__ void read16(const uint4* __restrict__ p, size_t n, unsigned* out) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = p[i];
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x12345678u) out[0] = x;  // keeps the loads
}

#define CK(x)                                                                \
  do {                                                                       \
    const CUresult r_ = (x);                                                 \
    if (r_ != CUDA_SUCCESS) {                                                \
      const char* s_ = "?";                                                  \
      cuGetErrorString(r_, &s_);                                             \
      std::fprintf(stderr, "ptx_profile: %s failed: %s\n", #x, s_);         \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: ptx_profile PTX QBYTES N K NB WARPS CALLS\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "ptx_profile: cannot read '%s'\n", argv[1]);
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string ptx = text.str();
  // NVIDIA's OpenCL adds the launch's work offsets from %envreg0..2 to every group id; a CUDA
  // launch leaves them undefined (every group then read the last weight row), so they become 0.
  for (int e = 0; e < 3; ++e)
    for (const std::string reg = "%envreg" + std::to_string(e); ptx.find(reg) != std::string::npos;)
      ptx.replace(ptx.find(reg), reg.size(), "0");
  const int qbytes = std::atoi(argv[2]), N = std::atoi(argv[3]), K = std::atoi(argv[4]);
  const int NB = std::atoi(argv[5]), WARPS = std::atoi(argv[6]), calls = std::atoi(argv[7]);
  if ((qbytes != 18 && qbytes != 20 && qbytes != 34) || N <= 0 || K <= 0 || K % 32 || NB <= 0 || WARPS <= 0 ||
      calls <= 0) {
    std::fprintf(stderr, "ptx_profile: QBYTES must be 18, 20 or 34, K a multiple of 32, the rest positive\n");
    return 2;
  }
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuCtxCreate(&ctx, nullptr, 0, dev));
  CUmodule mod;
  char log[8192] = {0};
  CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* val[2] = {log, reinterpret_cast<void*>(sizeof log)};
  if (cuModuleLoadDataEx(&mod, ptx.c_str(), 2, opt, val) != CUDA_SUCCESS) {
    std::fprintf(stderr, "ptx_profile: the PTX did not load:\n%s\n", log);
    return 1;
  }
  CUfunction fn;
  CK(cuModuleGetFunction(&fn, mod, "gemm_q_blocks_i8"));

  const size_t wbytes = static_cast<size_t>(N) * (K / 32) * qbytes;
  const int copies = static_cast<int>(200e6 / wbytes) + 2;
  std::vector<unsigned char> host(wbytes);
  for (size_t i = 0; i < wbytes; ++i) host[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  for (size_t b = 0; b < wbytes / qbytes; ++b) {  // finite f16 scales (and q4_1 mins): 2^-7
    host[b * qbytes] = 0x00;
    host[b * qbytes + 1] = 0x20;
    if (qbytes == 20) host[b * qbytes + 2] = 0x00, host[b * qbytes + 3] = 0x20;
  }
  std::vector<CUdeviceptr> W(copies);
  for (auto& w : W) {
    CK(cuMemAlloc(&w, wbytes));
    CK(cuMemcpyHtoD(w, host.data(), wbytes));
  }
  CUdeviceptr A, C, X;
  CK(cuMemAlloc(&A, 2 * static_cast<size_t>(K)));
  CK(cuMemsetD16(A, 0x3F80, K));  // bf16 ones
  CK(cuMemAlloc(&C, 2 * static_cast<size_t>(N)));
  CK(cuMemAlloc(&X, 2 * static_cast<size_t>(N)));
  CK(cuMemsetD16(X, 0, N));
  // gemm_q_blocks_i8(M, N, K, alpha, beta, A, a_off, sam, W, w_off, swn, C, c_off, scm, X, x_off, sxm, sxn)
  int M = 1, n = N, k = K, sam = K, scm = N, sxm = 0, sxn = 1;  // non-const: launch arguments
  float alpha = 1.0f, beta = 0.0f;
  long long zero = 0, swn = K / 32;
  const unsigned groups = static_cast<unsigned>((N + NB * WARPS - 1) / (NB * WARPS));
  CUevent e0, e1;
  CK(cuEventCreate(&e0, 0));
  CK(cuEventCreate(&e1, 0));
  auto timed = [&](const char* what, auto launch) {
    for (int round = 0; round < 3; ++round) {
      CK(cuEventRecord(e0, nullptr));
      for (int i = 0; i < calls; ++i) launch(W[i % copies]);
      CK(cuEventRecord(e1, nullptr));
      CK(cuEventSynchronize(e1));
      float ms = 0;
      CK(cuEventElapsedTime(&ms, e0, e1));
      std::printf("%s N=%d K=%d: %.2f us a call, %.0f GB/s of weights\n", what, N, K, 1000.0 * ms / calls,
                  wbytes / (1e6 * ms / calls));
    }
  };
  timed("gemm_q_blocks_i8", [&](CUdeviceptr w) {
    void* args[] = {&M, &n, &k, &alpha, &beta, &A, &zero, &sam, &w,
                    &zero, &swn, &C, &zero, &scm, &X, &zero, &sxm, &sxn};
    CK(cuLaunchKernel(fn, groups, 1, 1, 32 * WARPS, 1, 1, 0, nullptr, args, nullptr));
  });
  timed("read16 (the same bytes)", [&](CUdeviceptr w) {
    read16<<<132 * 8, 256>>>(reinterpret_cast<const uint4*>(w), wbytes / 16, reinterpret_cast<unsigned*>(C));
  });
  return 0;
}
