// SPDX-License-Identifier: Apache-2.0
// R&D harness (not built by CMake): checks/times kernels/cl/attention.cl against a host reference.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
static std::string slurp(const char* p) { std::ifstream f(p); std::stringstream s; s << f.rdbuf(); return s.str(); }
#define CK(x) do { cl_int e_ = (x); if (e_) { printf("CL error %d at %s:%d\n", e_, __FILE__, __LINE__); exit(1);} } while (0)
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  // attn_rnd B Hq Hkv Lq Lk D causal maskkind BQ BK uselocal reps
  int B = atoi(argv[1]), Hq = atoi(argv[2]), Hkv = atoi(argv[3]), Lq = atoi(argv[4]), Lk = atoi(argv[5]), D = atoi(argv[6]);
  int causal = atoi(argv[7]), mk = atoi(argv[8]), BQ = atoi(argv[9]), BK = atoi(argv[10]), ul = atoi(argv[11]), reps = atoi(argv[12]);
  cl_platform_id plat; CK(clGetPlatformIDs(1, &plat, nullptr));
  cl_device_id dev; CK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, nullptr));
  cl_int err; cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, nullptr, &err);
  std::vector<float> Q(size_t(B) * Hq * Lq * D), K(size_t(B) * Hkv * Lk * D), V(K.size()), O(size_t(B) * Hq * Lq * D), R(O.size());
  std::vector<float> Mf(size_t(Lq) * Lk); std::vector<unsigned char> Mb(Mf.size());
  srand(1); for (auto* v : {&Q, &K, &V}) for (auto& x : *v) x = (rand() / (float)RAND_MAX - 0.5f);
  for (size_t i = 0; i < Mf.size(); ++i) { Mb[i] = rand() % 4 != 0; Mf[i] = Mb[i] ? (rand() % 3) * 0.5f : -INFINITY; }
  float scale = 1.0f / std::sqrt((float)D);
  for (int b = 0; b < B; ++b) for (int h = 0; h < Hq; ++h) for (int i = 0; i < Lq; ++i) {
    int hk = h / (Hq / Hkv); std::vector<double> s(Lk); double mx = -INFINITY;
    for (int j = 0; j < Lk; ++j) { double d = 0; for (int e = 0; e < D; ++e) d += (double)Q[((size_t(b) * Hq + h) * Lq + i) * D + e] * K[((size_t(b) * Hkv + hk) * Lk + j) * D + e];
      d *= scale; if (causal && j > Lk - Lq + i) d = -INFINITY; if (mk == 1) d += Mf[i * Lk + j]; if (mk == 2 && !Mb[i * Lk + j]) d = -INFINITY; s[j] = d; mx = std::max(mx, d); }
    double sum = 0; for (int j = 0; j < Lk; ++j) { s[j] = mx == -INFINITY ? 0 : std::exp(s[j] - mx); sum += s[j]; }
    for (int e = 0; e < D; ++e) { double o = 0; for (int j = 0; j < Lk; ++j) o += s[j] * V[((size_t(b) * Hkv + hk) * Lk + j) * D + e]; R[((size_t(b) * Hq + h) * Lq + i) * D + e] = sum > 0 ? o / sum : 0; }
  }
  auto mkbuf = [&](void* p, size_t n) { return clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, n, p, &err); };
  cl_mem dq = mkbuf(Q.data(), Q.size() * 4), dk = mkbuf(K.data(), K.size() * 4), dv = mkbuf(V.data(), V.size() * 4), dout = clCreateBuffer(ctx, 0, O.size() * 4, nullptr, &err);
  cl_mem dm = mk == 1 ? mkbuf(Mf.data(), Mf.size() * 4) : mkbuf(Mb.data(), Mb.size());
  std::string src = slurp("kernels/cl/attention.cl"); const char* s = src.c_str();
  cl_program p = clCreateProgramWithSource(ctx, 1, &s, nullptr, &err);
  char opts[512]; snprintf(opts, sizeof opts, "-cl-std=CL1.2 -I kernels/cl -DPRISM_DTYPE=0 -DD=%d -DDV=%d -DBQ=%d -DBK=%d -DUSE_LOCAL=%d -DCAUSAL=%d -DMASK_KIND=%d %s", D, D, BQ, BK, ul, causal, mk, getenv("EXTRA") ? getenv("EXTRA") : "");
  double t0 = now();
  if (clBuildProgram(p, 1, &dev, opts, nullptr, nullptr)) { size_t n; clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n); std::string log(n, 0);
    clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr); printf("%s\n", log.c_str()); return 1; }
  printf("build %.2fs\n", now() - t0);
  cl_kernel kk = clCreateKernel(p, "attention", &err); CK(err);
  int ai = 0; auto set = [&](size_t sz, const void* v) { CK(clSetKernelArg(kk, ai++, sz, v)); };
  long z = 0, one = 1, Dl = D;
  long qs[4] = {(long)Hq * Lq * D, (long)Lq * D, Dl, 1}, ks[4] = {(long)Hkv * Lk * D, (long)Lk * D, Dl, 1}, os[4] = {qs[0], qs[1], qs[2], 1}, ms[4] = {0, 0, Lk, 1};
  set(4, &Hq); set(4, &Hkv); set(4, &Lq); set(4, &Lk); set(4, &scale);
  set(8, &dq); set(8, &z); set(32, qs);
  set(8, &dk); set(8, &z); set(32, ks);
  set(8, &dv); set(8, &z); set(32, ks);
  set(8, &dout); set(8, &z); set(32, os);
  set(8, &dm); set(8, &z); set(32, ms);
  size_t g[3] = {size_t((Lq + BQ - 1) / BQ * BQ), size_t(Hq), size_t(B)}, l[3] = {size_t(BQ), 1, 1};
  std::vector<double> ts;
  for (int r = 0; r <= reps; ++r) { t0 = now(); CK(clEnqueueNDRangeKernel(q, kk, 3, nullptr, g, l, 0, nullptr, nullptr)); clFinish(q); if (r) ts.push_back(now() - t0); }
  std::sort(ts.begin(), ts.end());
  CK(clEnqueueReadBuffer(q, dout, CL_TRUE, 0, O.size() * 4, O.data(), 0, nullptr, nullptr));
  double e = 0; for (size_t i = 0; i < O.size(); ++i) e = std::max(e, (double)std::fabs(O[i] - R[i]));
  printf("median %.3f ms, max abs err %g\n", ts[ts.size() / 2] * 1e3, e);
}
