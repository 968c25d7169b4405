// SPDX-License-Identifier: Apache-2.0
// Standalone GEMM kernel harness for the NVIDIA kernels (gemm_nv.cl, gemm_mma.cl): builds a
// kernel with -D parameters, checks it against a double-precision reference on sampled entries
// (and that every output was written), and times it with OpenCL profiling events (median).
// No prism dispatch involved. Usage:
//   gemm_harness KERNEL_DIR PLAN            (PLAN: one case per line, '#' comments)
// A case: KIND DTYPE LAYOUT BATCH M N K [NAME=VALUE ...]
//   KIND: nv | skinny | mma (SPLITK=S runs gemm_nv_reduce / gemm_mma_reduce after it; nv with
//   STREAMK=1 SKG=P: stream-K over P groups, the rest whole tiles) | gpu (prism's
//   gemm_gpu.cl, for comparison); DTYPE: f32 | f16 | bf16; LAYOUT: nt (B is [N, K], as linear) or nn (B is
//   [K, N]); NAME=VALUE become -D defines.
// VERBOSE=1 on a case (with HARNESS_VERBOSE set) prints NVIDIA's -cl-nv-verbose build log;
// MAXRREG=N builds with NVIDIA's -cl-nv-maxrregcount=N.
// Env: HARNESS_PLATFORM (substring of the platform name, default NVIDIA), HARNESS_MS (time
// budget per case, default 300).
#include "cl_harness.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using cl_harness::read_text;

// Inline `#include "x.cl"` lines from the kernel folder (as prism's build_kernel does).
std::string resolve(const std::string& dir, const std::string& file) {
  std::stringstream in(read_text(dir + "/" + file)), out;
  std::string line;
  while (std::getline(in, line)) {
    auto p = line.find("#include \"");
    if (p == 0) {
      auto q = line.find('"', p + 10);
      out << resolve(dir, line.substr(p + 10, q - p - 10)) << "\n";
    } else {
      out << line << "\n";
    }
  }
  return out.str();
}

std::uint16_t to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(std::uint16_t h) {
  std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::uint16_t to_f16(float f) {  // round to nearest even, normal range only (inputs are in [-1, 1])
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const int exp = int((u >> 23) & 0xff) - 127 + 15;
  std::uint32_t mant = u & 0x7fffffu;
  if (exp <= 0) return static_cast<std::uint16_t>(sign);  // flush tiny values (rare here)
  std::uint32_t h = (std::uint32_t(exp) << 10) | (mant >> 13);
  const std::uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}
float from_f16(std::uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const float mant = float(h & 0x3ff);
  float v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024.0f + mant, exp - 25);
  return (h & 0x8000) ? -v : v;
}

struct plan_case {
  std::string kind, dtype, layout, line;
  long batch = 1, m = 0, n = 0, k = 0;
  std::map<std::string, long> defs;
  long def(const std::string& key, long fallback) const {
    auto it = defs.find(key);
    return it == defs.end() ? fallback : it->second;
  }
};

long ceil_div(long a, long b) {
  return (a + b - 1) / b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gemm_harness KERNEL_DIR PLAN\n");
    return 2;
  }
  const std::string kdir = argv[1];
  const std::string want = cl_harness::wanted_platform();
  const double budget_ms = std::getenv("HARNESS_MS") ? std::atof(std::getenv("HARNESS_MS")) : 300.0;

  const std::optional<cl::Device> found = cl_harness::find_device(want);
  if (!found) {
    std::fprintf(stderr, "no OpenCL platform matching '%s'\n", want.c_str());
    return 1;
  }
  const cl::Device dev = *found;
  std::printf("# device: %s (%s)\n", dev.getInfo<CL_DEVICE_NAME>().c_str(),
              dev.getInfo<CL_DRIVER_VERSION>().c_str());
  cl::Context ctx(dev);
  cl::CommandQueue q(ctx, dev, CL_QUEUE_PROFILING_ENABLE);
  std::map<std::string, cl::Program> programs;

  std::ifstream plan(argv[2]);
  if (!plan) {
    std::fprintf(stderr, "cannot read plan %s\n", argv[2]);
    return 2;
  }
  int cases = 0;
  std::string line;
  std::mt19937_64 rng(42);
  std::printf("%-70s %10s %10s %9s %s\n", "case", "us", "TFLOP/s", "rel_err", "status");
  int failures = 0;
  while (std::getline(plan, line)) {
    if (line.empty() || line[0] == '#') continue;
    plan_case c;
    c.line = line;
    ++cases;
    std::stringstream ls(line);
    ls >> c.kind >> c.dtype >> c.layout >> c.batch >> c.m >> c.n >> c.k;
    std::string kv;
    while (ls >> kv) {
      auto e = kv.find('=');
      c.defs[kv.substr(0, e)] = std::atol(kv.c_str() + e + 1);
    }
    const int dt = c.dtype == "f32" ? 0 : c.dtype == "f16" ? 1 : 2;
    const std::size_t es = dt == 0 ? 4 : 2;
    const bool nt = c.layout == "nt";
    const long B = c.batch, M = c.m, N = c.n, K = c.k;
    const bool bias = c.def("HAS_BIAS", 0) != 0;

    std::string file, kname;
    std::size_t local = 0, local_y = 1;  // gemm_gpu's work-group is 2-D
    long gx = 0, gy = 0;
    std::string opts = "-DPRISM_CPU=0 -DPRISM_DTYPE=" + std::to_string(dt);
    if (c.kind == "nv") {
      file = "gemm_nv.cl", kname = "gemm_nv";
      local = (c.def("BN", 128) / c.def("TN", 8)) * (c.def("BM", 128) / c.def("TM", 8));
      gx = ceil_div(N, c.def("BN", 128)) * local, gy = ceil_div(M, c.def("BM", 128));
      opts += " -DREDUCE -DA_KCONTIG=1 -DB_NCONTIG=" + std::string(nt ? "0" : "1");
    } else if (c.kind == "skinny") {
      file = "gemm_nv.cl", kname = "gemm_nv_skinny";
      local = 32 * c.def("WARPS", 4);
      gx = ceil_div(N, c.def("NB", 4) * c.def("WARPS", 4)) * local, gy = ceil_div(M, c.def("MB", 1));
    } else if (c.kind == "mma") {
      file = "gemm_mma.cl", kname = "gemm_mma";
      local = 32 * c.def("WARPS_M", 2) * c.def("WARPS_N", 2);
      gx = ceil_div(N, c.def("BN", 128)) * local, gy = ceil_div(M, c.def("BM", 128));
      opts += " -DREDUCE -DB_NCONTIG=" + std::string(nt ? "0" : "1");
    } else if (c.kind == "gpu") {
      file = "gemm_gpu.cl", kname = "gemm_gpu";
      const long lx = c.def("TN", 64) / c.def("WN", 4), ly = c.def("TM", 64) / c.def("WM", 4);
      local = lx, local_y = ly;
      gx = ceil_div(N, c.def("TN", 64)) * lx, gy = ceil_div(M, c.def("TM", 64)) * ly;
      opts += " -DA_KCONTIG=1 -DB_NCONTIG=" + std::string(nt ? "0" : "1");
    } else {
      std::printf("%-70s bad kind\n", line.c_str());
      continue;
    }
    for (auto& [key, val] : c.defs)
      if (key != "PRISM_DTYPE" && key != "VERBOSE" && key != "MAXRREG" && key != "SKG")
        opts += " -D" + key + "=" + std::to_string(val);
    if (c.def("MAXRREG", 0)) opts += " -cl-nv-maxrregcount=" + std::to_string(c.def("MAXRREG", 0));
    if (c.def("VERBOSE", 0) && std::getenv("HARNESS_VERBOSE")) opts += " -cl-nv-verbose";
    if (!c.defs.count("HAS_BIAS")) opts += " -DHAS_BIAS=0";

    // Host operands: A [B, M, K], B [B, N, K] (nt) or [B, K, N] (nn), bias [N]; values in [-1, 1]
    // rounded to the storage dtype so that the reference sees exactly what the kernel reads.
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto fill = [&](std::size_t count, std::vector<float>& vals, std::vector<std::uint8_t>& bytes) {
      vals.resize(count);
      bytes.resize(count * es);
      for (std::size_t i = 0; i < count; ++i) {
        float v = u(rng);
        if (dt == 2) {
          auto h = to_bf16(v);
          v = from_bf16(h);
          std::memcpy(&bytes[i * 2], &h, 2);
        } else if (dt == 1) {
          auto h = to_f16(v);
          v = from_f16(h);
          std::memcpy(&bytes[i * 2], &h, 2);
        } else {
          std::memcpy(&bytes[i * 4], &v, 4);
        }
        vals[i] = v;
      }
    };
    std::vector<float> av, bv, xv;
    std::vector<std::uint8_t> ab, bb, xb;
    fill(std::size_t(B * M * K), av, ab);
    fill(std::size_t(B * N * K), bv, bb);
    fill(std::size_t(N), xv, xb);

    char status[256] = "ok";
    double us = 0, rel = 0;
    try {
      auto it = programs.find(file + opts);
      if (it == programs.end()) {
        cl::Program p(ctx, resolve(kdir, "prelude.cl") + resolve(kdir, file));  // as build_kernel
        try {
          p.build({dev}, opts.c_str());
        } catch (cl::BuildError& e) {
          std::string log;
          for (auto& [d, l] : e.getBuildLog()) log += l;
          throw std::runtime_error("build failed: " + log.substr(0, 1500));
        }
        if (std::getenv("HARNESS_VERBOSE") &&
            c.def("VERBOSE", 0)) {  // NVIDIA: -cl-nv-verbose register report
          std::string log = p.getBuildInfo<CL_PROGRAM_BUILD_LOG>(dev);
          for (auto& ch : log)
            if (ch == '\n') ch = ' ';
          const auto at = log.find("Compiling entry function '" + kname + "'");  // skip other kernels
          std::printf("# build log: %s\n", log.substr(at == std::string::npos ? 0 : at, 600).c_str());
        }
        it = programs.emplace(file + opts, p).first;
      }
      cl::Kernel kern(it->second, kname.c_str());
      cl::Buffer da(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, ab.size(), ab.data());
      cl::Buffer db(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bb.size(), bb.data());
      cl::Buffer dx(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, xb.size(), xb.data());
      const std::size_t cbytes = std::size_t(B * M * N) * es;
      // Poison: all-ones bytes are a NaN in f32, f16 and bf16.
      std::vector<std::uint8_t> cb(cbytes, 0xff);
      cl::Buffer dc(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, cb.size(), cb.data());
      const int sam = int(K), sak = 1, sbk = nt ? 1 : int(N), sbn = nt ? int(K) : 1;
      int a = 0;
      kern.setArg(a++, int(M)), kern.setArg(a++, int(N)), kern.setArg(a++, int(K));
      kern.setArg(a++, 1.0f), kern.setArg(a++, 1.0f);
      kern.setArg(a++, da), kern.setArg(a++, cl_long(0)), kern.setArg(a++, sam), kern.setArg(a++, sak);
      kern.setArg(a++, cl_long(M * K));
      kern.setArg(a++, db), kern.setArg(a++, cl_long(0)), kern.setArg(a++, sbk), kern.setArg(a++, sbn);
      kern.setArg(a++, cl_long(N * K));
      const long splits = c.kind == "nv" || c.kind == "mma" ? c.def("SPLITK", 1) : 1;
      cl::Buffer dw =
          splits > 1 ? cl::Buffer(ctx, CL_MEM_READ_WRITE, std::size_t(splits * B * M * N) * 4) : dc;
      kern.setArg(a++, dw), kern.setArg(a++, cl_long(0)), kern.setArg(a++, int(N)),
          kern.setArg(a++, cl_long(M * N));
      kern.setArg(a++, dx), kern.setArg(a++, cl_long(0)), kern.setArg(a++, 0), kern.setArg(a++, 1);
      // Stream-K: P groups share the last tiles' k-iterations (gemm_nv.cl); the whole tiles first.
      const bool streamk = c.kind == "nv" && c.def("STREAMK", 0) != 0;
      long dp = 0, skg = 0;
      cl::Buffer skw, skc;
      if (streamk) {
        const long bm = c.def("BM", 128), bn = c.def("BN", 128);
        const long tiles = B * ceil_div(M, bm) * ceil_div(N, bn), P = c.def("SKG", 132);
        dp = tiles % P == 0 ? tiles : std::max(0L, tiles - tiles % P - P);
        skg = dp == tiles ? 0 : P;  // fewer sk tiles than groups: a tile's iterations span groups
        skw = cl::Buffer(ctx, CL_MEM_READ_WRITE, std::size_t(std::max(1L, 2 * skg * bm * bn)) * 4);
        std::vector<int> zeros(std::size_t(std::max(1L, tiles - dp)), 0);
        skc = cl::Buffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, zeros.size() * 4, zeros.data());
        kern.setArg(a++, cl_long(B)), kern.setArg(a++, skw), kern.setArg(a++, skc);
        kern.setArg(a++, cl_long(dp)), kern.setArg(a++, cl_long(skg));
        gx = (dp + skg) * long(local), gy = 1;
      }
      cl::Kernel red;
      if (splits > 1) {
        red = cl::Kernel(it->second, c.kind == "nv" ? "gemm_nv_reduce" : "gemm_mma_reduce");
        int r = 0;
        red.setArg(r++, int(M)), red.setArg(r++, int(N)), red.setArg(r++, int(splits));
        red.setArg(r++, cl_long(B * M * N)), red.setArg(r++, dw), red.setArg(r++, 1.0f),
            red.setArg(r++, 1.0f);
        red.setArg(r++, dc), red.setArg(r++, cl_long(0)), red.setArg(r++, int(N)),
            red.setArg(r++, cl_long(M * N));
        red.setArg(r++, dx), red.setArg(r++, cl_long(0)), red.setArg(r++, 0), red.setArg(r++, 1);
      }
      const cl::NDRange global(gx, gy, streamk ? 1 : B * splits), lsz(local, local_y, 1);
      // Returns the device time in microseconds (both launches for split-K).
      auto run_once = [&]() {
        cl::Event ev, ev2;
        q.enqueueNDRangeKernel(kern, cl::NullRange, global, lsz, nullptr, &ev);
        if (splits > 1)
          q.enqueueNDRangeKernel(red, cl::NullRange, cl::NDRange(ceil_div(N, 64) * 64, M, B),
                                 cl::NDRange(64, 1, 1), nullptr, &ev2);
        else
          ev2 = ev;
        ev2.wait();
        return cl_harness::span_us(ev, ev2);
      };
      run_once();
      q.enqueueReadBuffer(dc, CL_TRUE, 0, cbytes, cb.data());
      // Check: every output written; sampled entries against the double reference.
      auto out_at = [&](std::size_t i) -> double {
        if (dt == 0) {
          float f;
          std::memcpy(&f, &cb[i * 4], 4);
          return f;
        }
        std::uint16_t h;
        std::memcpy(&h, &cb[i * 2], 2);
        return dt == 2 ? from_bf16(h) : from_f16(h);
      };
      std::size_t unwritten = 0;
      for (std::size_t i = 0; i < std::size_t(B * M * N); ++i)
        if (std::isnan(out_at(i))) ++unwritten;
      double num = 0, den = 0;
      const long samples = std::min<long>(B * M * N, 4096);
      for (long s = 0; s < samples; ++s) {
        const long idx = samples == B * M * N ? s : long(rng() % std::uint64_t(B * M * N));
        const long bi = idx / (M * N), mi = (idx / N) % M, ni = idx % N;
        double ref = 0;
        for (long kk = 0; kk < K; ++kk) {
          const double bval = nt ? bv[(bi * N + ni) * K + kk] : bv[(bi * K + kk) * N + ni];
          ref += double(av[(bi * M + mi) * K + kk]) * bval;
        }
        if (bias) ref += xv[ni];
        const double got = out_at(std::size_t(idx));
        num += (got - ref) * (got - ref);
        den += ref * ref;
      }
      rel = std::sqrt(num / std::max(den, 1e-300));
      const double bound = dt != 0 ? 1e-2 : c.kind == "mma" ? 2e-3 : 1e-5;  // f16/bf16, TF32, f32
      if (unwritten)
        std::snprintf(status, sizeof status, "FAIL %zu unwritten", unwritten);
      else if (!(rel <= bound))
        std::snprintf(status, sizeof status, "FAIL rel_err > %g", bound);
      if (std::strncmp(status, "FAIL", 4) == 0) ++failures;
      // Time: warm-up, then repeats within the budget; median of device times.
      for (int w = 0; w < 3; ++w) run_once();
      std::vector<double> times;
      const auto t0 = std::chrono::steady_clock::now();
      while (times.size() < 200) {
        times.push_back(run_once());
        const double el =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (times.size() >= 5 && el > budget_ms) break;
      }
      us = cl_harness::median(times);
    } catch (cl::Error& e) {
      std::snprintf(status, sizeof status, "FAIL %s (%d)", e.what(), e.err());
      ++failures;
    } catch (std::exception& e) {
      std::snprintf(status, sizeof status, "FAIL %s", e.what());
      ++failures;
    }
    const double tflops = us > 0 ? 2.0 * B * M * N * K / (us * 1e6) : 0;
    std::printf("%-70s %10.1f %10.2f %9.2e %s\n", line.c_str(), us, tflops, rel, status);
    std::fflush(stdout);
  }
  if (cases == 0) std::fprintf(stderr, "plan %s holds no cases\n", argv[2]);
  return failures || cases == 0 ? 1 : 0;
}
