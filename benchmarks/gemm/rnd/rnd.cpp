// SPDX-License-Identifier: Apache-2.0
// R&D harness (not built by CMake): times kernels/cl/gemm_cpu.cl configs vs CLBlast and OpenBLAS.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <cblas.h>
#include <clblast_c.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <cstring>
static std::string slurp(const char* p) { std::ifstream f(p); std::stringstream s; s << f.rdbuf(); return s.str(); }
#define CK(x) do { cl_int e_ = (x); if (e_) { printf("CL error %d at %s:%d\n", e_, __FILE__, __LINE__); exit(1);} } while (0)
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main(int argc, char** argv) {
  // rnd M N K layout(nn|nt) "defines" lx ly reps what(prism|clblast|blas|all)
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  std::string layout = argv[4], defs = argv[5];
  int lx = atoi(argv[6]), ly = atoi(argv[7]), reps = atoi(argv[8]);
  std::string what = argc > 9 ? argv[9] : "all"; std::string kname = argc > 10 ? argv[10] : "gemm_cpu";
  cl_platform_id plat; CK(clGetPlatformIDs(1, &plat, nullptr));
  cl_device_id dev; CK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, nullptr));
  cl_int err; cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, nullptr, &err);
  std::vector<float> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N), r(size_t(M) * N);
  srand(1); for (auto& x : a) x = (rand() % 7) - 3; for (auto& x : b) x = (rand() % 5) - 2;
  bool nt = layout == "nt";  // nt: B stored as [N,K]
  cl_mem da = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, a.size() * 4, a.data(), &err);
  cl_mem db = clCreateBuffer(ctx, CL_MEM_COPY_HOST_PTR, b.size() * 4, b.data(), &err);
  cl_mem dc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, c.size() * 4, nullptr, &err);
  double flops = 2.0 * M * N * K;
  auto t0 = now();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, nt ? CblasTrans : CblasNoTrans, M, N, K, 1.f, a.data(), K, b.data(), nt ? K : N, 0.f, r.data(), N);
  if (what == "all" || what == "blas") {
    std::vector<double> ts;
    for (int i = 0; i < reps; ++i) { t0 = now(); cblas_sgemm(CblasRowMajor, CblasNoTrans, nt ? CblasTrans : CblasNoTrans, M, N, K, 1.f, a.data(), K, b.data(), nt ? K : N, 0.f, r.data(), N); ts.push_back(now() - t0); }
    std::sort(ts.begin(), ts.end()); printf("openblas  %8.2f GFLOP/s (best %.2f)\n", flops / ts[ts.size() / 2] * 1e-9, flops / ts[0] * 1e-9);
  }
  if (what == "all" || what == "clblast") {
    std::vector<double> ts;
    for (int i = 0; i < reps + 1; ++i) { t0 = now();
      CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, nt ? CLBlastTransposeYes : CLBlastTransposeNo, M, N, K, 1.f, da, 0, K, db, 0, nt ? K : N, 0.f, dc, 0, N, &q, nullptr);
      clFinish(q); if (i) ts.push_back(now() - t0); }
    std::sort(ts.begin(), ts.end()); printf("clblast   %8.2f GFLOP/s (best %.2f)\n", flops / ts[ts.size() / 2] * 1e-9, flops / ts[0] * 1e-9);
  }
  if (what == "all" || what == "prism") {
    std::string src = slurp(("kernels/cl/" + kname + ".cl").c_str());  // #include "gemm_common.cl" via -I
    const char* s = src.c_str();
    cl_program p = clCreateProgramWithSource(ctx, 1, &s, nullptr, &err);
    t0 = now();
    std::string opts = std::string("-cl-std=CL1.2 -I kernels/cl -DHAS_BIAS=0 ") + (getenv("DT") ? getenv("DT") : "-DPRISM_DTYPE=0") + " " + defs + (nt ? " -DB_NCONTIG=0" : " -DB_NCONTIG=1");
    if (clBuildProgram(p, 1, &dev, opts.c_str(), nullptr, nullptr)) {
      size_t n; clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n); std::string log(n, 0);
      clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr); printf("%s\n", log.c_str()); return 1; }
    printf("build %.2fs\n", now() - t0);
    { size_t n; clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n); std::string log(n, 0);
      clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr); if (n > 2) printf("log: %s\n", log.c_str()); }
    cl_kernel kk = clCreateKernel(p, kname.c_str(), &err); CK(err);
    int RM = 1, RN = 1, VWv = 1; bool outer = defs.find("FORM_OUTER") != std::string::npos;
    auto gi = [&](const char* key, int& v) { const char* p = strstr(defs.c_str(), key); if (p) sscanf(p + strlen(key), "%d", &v); };
    gi("-DRM=", RM); gi("-DRN=", RN); gi("-DVW=", VWv);
    float alpha = 1, beta = 0; long zero = 0; int sam = K, sak = 1, sbk = nt ? 1 : N, sbn = nt ? K : 1, scm = N, zi = 0;
    long sab = 0;
    int ai = 0;
    auto set = [&](size_t sz, const void* v) { CK(clSetKernelArg(kk, ai++, sz, v)); };
    set(4, &M); set(4, &N); set(4, &K); set(4, &alpha); set(4, &beta);
    set(sizeof(cl_mem), &da); set(8, &zero); set(4, &sam); set(4, &sak); set(8, &sab);
    set(sizeof(cl_mem), &db); set(8, &zero); set(4, &sbk); set(4, &sbn); set(8, &sab);
    set(sizeof(cl_mem), &dc); set(8, &zero); set(4, &scm); set(8, &sab);
    set(sizeof(cl_mem), &dc); set(8, &zero); set(4, &zi); set(4, &zi);
    int kc = K; { const char* e = getenv("KC"); if (e) kc = atoi(e); }
    bool iscpu = kname == "gemm_cpu"; if (iscpu) set(4, &zi);
    size_t cols = outer ? RN * VWv : RN;
    size_t gx = (N + cols - 1) / cols, gy = (M + RM - 1) / RM;
    gx = (gx + lx - 1) / lx * lx; gy = (gy + ly - 1) / ly * ly;
    if (kname == "gemm_gpu") { int TM=1,TN=1,WM=1,WN=1; gi("-DTM=",TM); gi("-DTN=",TN); gi("-DWM=",WM); gi("-DWN=",WN); lx=TN/WN; ly=TM/WM; gx=(N+TN-1)/TN*lx; gy=(M+TM-1)/TM*ly; }
    if (kname == "gemm_gemv") { int NB=1,WG=1,MB=1; gi("-DNB=",NB); gi("-DWG=",WG); gi("-DMB=",MB); lx=WG; ly=1; gx=(N+NB-1)/NB*WG; gy=(M+MB-1)/MB; }
    size_t g[3] = {gx, gy, 1}, l[3] = {(size_t)lx, (size_t)ly, 1};
    std::vector<double> ts;
    auto launch = [&] {
      if (!iscpu || kc >= K) { CK(clEnqueueNDRangeKernel(q, kk, 3, nullptr, g, l, 0, nullptr, nullptr)); return; }
      for (int k0 = 0; k0 < K; k0 += kc) {
        int kn = std::min(kc, K - k0); long ao = k0 * (long)sak, bo = k0 * (long)sbk; int acc = k0 > 0;
        CK(clSetKernelArg(kk, 2, 4, &kn)); CK(clSetKernelArg(kk, 6, 8, &ao)); CK(clSetKernelArg(kk, 11, 8, &bo)); CK(clSetKernelArg(kk, 23, 4, &acc));
        CK(clEnqueueNDRangeKernel(q, kk, 3, nullptr, g, l, 0, nullptr, nullptr));
      }
    };
    for (int i = 0; i < reps + 1; ++i) { t0 = now(); launch(); clFinish(q); if (i) ts.push_back(now() - t0); else printf("first launch %.2fs\n", now() - t0); }
    std::sort(ts.begin(), ts.end()); printf("prism     %8.2f GFLOP/s (best %.2f)  [%s lx=%d ly=%d]\n", flops / ts[ts.size() / 2] * 1e-9, flops / ts[0] * 1e-9, defs.c_str(), lx, ly);
    CK(clEnqueueReadBuffer(q, dc, CL_TRUE, 0, c.size() * 4, c.data(), 0, nullptr, nullptr));
    double maxe = 0; for (size_t i = 0; i < c.size(); ++i) maxe = std::max(maxe, (double)std::fabs(c[i] - r[i]));
    printf("max abs err %g\n", maxe);
  }
}
