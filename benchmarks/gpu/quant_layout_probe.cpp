// SPDX-License-Identifier: Apache-2.0
// Does the device layout of q4_0 weights bound the GPU's M = 1 GEMV? Runs the kernels of
// quant_layout_probe.cl (the same team walk over GGUF's 18-byte blocks and over a planar layout of
// nibble bytes and scales, with f32 or int8 activations; bf16 rows and a plain 16-byte read for
// scale) on random weights, checks every kernel's sampled rows against a double reference, and
// times each with OpenCL profiling events (median of a pipelined run). No prism dispatch involved.
// Usage:
//   prism_quant_layout_probe KERNEL_FILE N K [N K ...]
// Env: HARNESS_PLATFORM (substring of the platform name, default NVIDIA); PROBE_SWEEP=0 runs one
// config per kernel (the CI smoke), otherwise NB x UNROLL x WARPS are swept; PROBE_REPS (default 30);
// PROBE_KERNELS (comma-separated kernel names; all when unset).
#include "cl_harness.hpp"

#include <algorithm>
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
#include <tuple>
#include <vector>

namespace {

using cl_harness::read_text;

std::uint16_t to_half(float f) {  // normal range and zero only (the probe's scales)
  if (f == 0.0f) return 0;
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  const std::uint32_t sign = (b >> 16) & 0x8000u;
  const int e = static_cast<int>((b >> 23) & 0xFF) - 127 + 15;
  const std::uint32_t m = (b >> 13) & 0x3FFu;
  return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(e) << 10) | m);
}
double from_half(std::uint16_t h) {
  const int e = (h >> 10) & 0x1F;
  const double m = (h & 0x3FF) / 1024.0;
  const double v = e == 0 ? std::ldexp(m, -14) : std::ldexp(1.0 + m, e - 15);
  return (h & 0x8000) ? -v : v;
}

struct problem {
  int n, k;
  std::vector<std::uint8_t> gguf, qs;  // [n][k/32] blocks of 18 bytes; nibble plane [n][k/2]
  std::vector<std::uint16_t> d, wbf;   // scale plane [n][k/32]; bf16 weights [n][k]
  std::vector<float> x, xd, xs;        // activations; int8 blocks' d_a and d_a * sum(q_a)
  double rs = 1;  // rsqrt(mean(x^2) + 1e-5): the norm's scalar of the _norm/_local kernels
  std::vector<std::int8_t> xq;
};

problem make_problem(int n, int k, std::mt19937& rng) {
  problem p{n, k, {}, {}, {}, {}, {}, {}, {}, {}};
  const int blocks = k / 32;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f), scale(0.5f / 64, 1.5f / 64);
  p.gguf.resize(static_cast<size_t>(n) * blocks * 18);
  p.qs.resize(static_cast<size_t>(n) * k / 2);
  p.d.resize(static_cast<size_t>(n) * blocks);
  for (size_t b = 0; b < p.d.size(); ++b) {
    const std::uint16_t h = to_half(scale(rng));
    p.d[b] = h;
    std::memcpy(&p.gguf[b * 18], &h, 2);
    for (int j = 0; j < 16; ++j)
      p.qs[b * 16 + j] = p.gguf[b * 18 + 2 + j] = static_cast<std::uint8_t>(byte(rng));
  }
  p.wbf.resize(static_cast<size_t>(n) * k);
  for (auto& w : p.wbf) {
    const float f = u(rng) / 16;
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    w = static_cast<std::uint16_t>(bits >> 16);
  }
  p.x.resize(k);
  for (auto& v : p.x) v = u(rng);
  p.xq.resize(k);
  p.xd.resize(blocks);
  p.xs.resize(blocks);
  for (int b = 0; b < blocks; ++b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(p.x[b * 32 + i]));
    const float da = amax / 127.0f;
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const float id = da > 0 ? 1.0f / da : 0.0f;  // as the kernels: x * (1 / d), rounded to even
      const int q = static_cast<int>(std::lrint(p.x[b * 32 + i] * id));
      p.xq[b * 32 + i] = static_cast<std::int8_t>(std::clamp(q, -127, 127));
      sum += p.xq[b * 32 + i];
    }
    p.xd[b] = da;
    p.xs[b] = da * static_cast<float>(sum);
  }
  double ss = 0;
  for (float v : p.x) ss += static_cast<double>(v) * v;
  p.rs = 1.0 / std::sqrt(ss / k + 1e-5);
  return p;
}

// Weight k of a row's block b: GGUF's nibble order (k < 16 low nibble of byte k, else high of k - 16).
int nibble(const problem& p, long row, int b, int i) {
  const std::uint8_t byte_ = p.qs[(row * (p.k / 32) + b) * 16 + (i % 16)];
  return i < 16 ? (byte_ & 0xF) : (byte_ >> 4);
}

// Reference row n for activation mode: 0 f32, 1 int8 blocks, 2 bf16 weights. Returns the value and
// the sum of |terms| (the scale of f32 accumulation error).
std::pair<double, double> reference(const problem& p, long row, int mode) {
  double s = 0, mag = 0;
  const int blocks = p.k / 32;
  for (int b = 0; b < blocks; ++b) {
    const double dw = from_half(p.d[row * blocks + b]);
    for (int i = 0; i < 32; ++i) {
      double w, a;
      if (mode == 2) {
        std::uint32_t bits = static_cast<std::uint32_t>(p.wbf[row * p.k + b * 32 + i]) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        w = f;
      } else {
        w = dw * (nibble(p, row, b, i) - 8);
      }
      a = mode == 1 ? p.xd[b] * p.xq[b * 32 + i] : p.x[b * 32 + i];
      s += w * a;
      mag += std::fabs(w * a);
    }
  }
  return {s, mag};
}

struct config {
  std::string kernel;
  int nb, unroll, warps;
};

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 4 || (argc - 2) % 2 != 0) {
    std::fprintf(stderr, "usage: %s KERNEL_FILE N K [N K ...]  (K a multiple of 256)\n", argv[0]);
    return 2;
  }
  const std::string want = cl_harness::wanted_platform();
  const bool sweep = !(std::getenv("PROBE_SWEEP") && std::string(std::getenv("PROBE_SWEEP")) == "0");
  const int reps = cl_harness::env_int("PROBE_REPS", 30);
  const std::optional<cl::Device> found = cl_harness::find_device(want);
  if (!found) {
    std::fprintf(stderr, "no OpenCL platform matching '%s'\n", want.c_str());
    return 2;
  }
  const cl::Device dev = *found;
  const bool nvidia = dev.getInfo<CL_DEVICE_VENDOR>().find("NVIDIA") != std::string::npos;
  std::printf("device: %s (%s)\n", dev.getInfo<CL_DEVICE_NAME>().c_str(),
              dev.getInfo<CL_DEVICE_VERSION>().c_str());
  cl::Context ctx(dev);
  cl::CommandQueue q(ctx, dev, CL_QUEUE_PROFILING_ENABLE);
  const std::string src = read_text(argv[1]);
  std::map<std::string, cl::Program> programs;
  // q4_gguf_i8_chunk reads its unroll as the lanes a row shares (LPR = 32 / unroll).
  auto program = [&](int nb, int unroll, int warps) -> cl::Program& {
    const std::string opts = "-DNB=" + std::to_string(nb) + " -DUNROLL=" + std::to_string(unroll) +
                             " -DWARPS=" + std::to_string(warps) + " -DQ_DP4A=" + (nvidia ? "1" : "0") +
                             " -DLPR=" + std::to_string(32 / unroll);
    auto it = programs.find(opts);
    if (it != programs.end()) return it->second;
    cl::Program prog(ctx, src);
    try {
      prog.build({dev}, opts.c_str());
    } catch (const cl::BuildError&) {
      std::fprintf(stderr, "build failed (%s):\n%s\n", opts.c_str(),
                   prog.getBuildInfo<CL_PROGRAM_BUILD_LOG>(dev).c_str());
      throw;
    }
    return programs.emplace(opts, prog).first->second;
  };

  std::vector<config> configs;
  // q4_gguf_i8_norm runs after quantize_x (timed as the pair); q4_gguf_i8_local quantizes x itself.
  const char* kernels[] = {"q4_gguf_f",       "q4_planar_f",      "q4_gguf_i8", "q4_planar_i8",
                           "q4_gguf_i8_norm", "q4_gguf_i8_local", "bf16_rows",  "q4_gguf_i8_chunk", "q4_gguf_i8_stage"};
  const char* only = std::getenv("PROBE_KERNELS");  // comma-separated names; all when unset
  for (const char* k : kernels) {
    if (only && ("," + std::string(only) + ",").find("," + std::string(k) + ",") == std::string::npos)
      continue;
    const bool chunk = std::string(k) == "q4_gguf_i8_chunk";  // needs nb * 32 / unroll >= 32
    const bool stage = std::string(k) == "q4_gguf_i8_stage";  // has no unroll
    if (!sweep) {
      configs.push_back({k, 2, 2, 2});
      continue;
    }
    for (int nb : {1, 2, 4})
      for (int unroll : {1, 2, 4})
        for (int warps : {4, 8})
          if ((!chunk || nb >= unroll) && (!stage || unroll == 1)) configs.push_back({k, nb, unroll, warps});
    if (stage)
      for (int nb : {1, 2}) configs.push_back({k, nb, 1, 16});
    if (chunk)
      for (int warps : {2, 16}) configs.push_back({k, 2, 2, warps});
  }

  std::mt19937 rng(42);
  int failures = 0;
  for (int a = 2; a + 1 < argc; a += 2) {
    const int n = std::atoi(argv[a]), k = std::atoi(argv[a + 1]);
    if (n <= 0 || k <= 0 || k % 256 != 0) {
      std::fprintf(stderr, "bad shape %s x %s: N > 0 and K a positive multiple of 256\n", argv[a],
                   argv[a + 1]);
      return 2;
    }
    const problem p = make_problem(n, k, rng);
    auto buf = [&](const void* data, size_t bytes) {
      return cl::Buffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, const_cast<void*>(data));
    };
    cl::Buffer gguf = buf(p.gguf.data(), p.gguf.size()), qs = buf(p.qs.data(), p.qs.size()),
               d = buf(p.d.data(), p.d.size() * 2), wbf = buf(p.wbf.data(), p.wbf.size() * 2),
               x = buf(p.x.data(), p.x.size() * 4), xq = buf(p.xq.data(), p.xq.size()),
               xd = buf(p.xd.data(), p.xd.size() * 4), xs = buf(p.xs.data(), p.xs.size() * 4);
    cl::Buffer y(ctx, CL_MEM_READ_WRITE, static_cast<size_t>(n) * 4);
    // quantize_x's outputs (what q4_gguf_i8_norm reads).
    cl::Buffer dq(ctx, CL_MEM_READ_WRITE, static_cast<size_t>(k)), dd(ctx, CL_MEM_READ_WRITE, k / 32 * 4),
        ds(ctx, CL_MEM_READ_WRITE, k / 32 * 4), dss(ctx, CL_MEM_READ_WRITE, k / 32 * 4);
    cl::Kernel quantize(program(1, 1, 4), "quantize_x");
    quantize.setArg(0, k);
    quantize.setArg(1, x);
    quantize.setArg(2, dq);
    quantize.setArg(3, dd);
    quantize.setArg(4, ds);
    quantize.setArg(5, dss);
    const cl::NDRange q_global((k / 32 + 63) / 64 * 64), q_local(64);
    const double q4_bytes = static_cast<double>(p.gguf.size()),
                 bf_bytes = static_cast<double>(p.wbf.size()) * 2;

    auto time_it = [&](cl::Kernel& kern, cl::NDRange global, cl::NDRange local) {
      for (int i = 0; i < 2; ++i) q.enqueueNDRangeKernel(kern, cl::NullRange, global, local);
      q.finish();
      std::vector<cl::Event> ev(reps);
      for (int i = 0; i < reps; ++i)
        q.enqueueNDRangeKernel(kern, cl::NullRange, global, local, nullptr, &ev[i]);
      q.finish();
      std::vector<double> us;
      for (auto& e : ev) us.push_back(cl_harness::span_us(e, e));
      return cl_harness::median(us);
    };

    // A launch sequence back to back, `reps` times, events on its first and last commands only
    // (profiling every command adds device time between them): microseconds a sequence.
    auto time_seq = [&](const std::vector<std::tuple<cl::Kernel*, cl::NDRange, cl::NDRange>>& seq) {
      for (int i = 0; i < 2; ++i)
        for (auto& [kern, g, l] : seq) q.enqueueNDRangeKernel(*kern, cl::NullRange, g, l);
      q.finish();
      cl::Event first, last;
      for (int i = 0; i < reps; ++i)
        for (size_t c = 0; c < seq.size(); ++c) {
          const bool f = i == 0 && c == 0, l = i == reps - 1 && c == seq.size() - 1;
          auto& [kern, g, lo] = seq[c];
          q.enqueueNDRangeKernel(*kern, cl::NullRange, g, lo, nullptr, f ? &first : (l ? &last : nullptr));
        }
      q.finish();
      return cl_harness::span_us(first, last) / reps;
    };

    // The read the GEMVs are held against: the q4_0 bytes, then the bf16 bytes, in 16-byte loads.
    double read_gbs[2];
    for (int r = 0; r < 2; ++r) {
      const double bytes = r == 0 ? q4_bytes : bf_bytes;
      cl::Kernel kern(program(1, 1, 4), "read_sum");
      const long n16 = static_cast<long>(bytes / 16);
      const size_t threads = static_cast<size_t>(std::min<long>((n16 + 255) / 256 * 256, 1L << 20));
      cl::Buffer out(ctx, CL_MEM_WRITE_ONLY, threads * 4);
      kern.setArg(0, r == 0 ? gguf : wbf);
      kern.setArg(1, static_cast<cl_long>(n16));
      kern.setArg(2, out);
      const double us = time_it(kern, cl::NDRange(threads), cl::NDRange(256));
      read_gbs[r] = bytes / us / 1e3;
      std::printf("%d x %d  read_sum %-9s %9.1f us %8.1f GB/s\n", n, k, r == 0 ? "q4_0" : "bf16", us,
                  read_gbs[r]);
    }

    for (const auto& c : configs) {
      cl::Kernel kern(program(c.nb, c.unroll, c.warps), c.kernel.c_str());
      int arg = 0;
      kern.setArg(arg++, n);
      kern.setArg(arg++, k);
      const bool planar = c.kernel.find("planar") != std::string::npos,
                 local_q = c.kernel == "q4_gguf_i8_local", normed = c.kernel == "q4_gguf_i8_norm",
                 i8 = c.kernel.find("i8") != std::string::npos && !local_q;
      if (local_q && k > 11008) continue;  // QL_K
      const bool bf = c.kernel == "bf16_rows";
      if (bf) {
        kern.setArg(arg++, wbf);
      } else if (planar) {
        kern.setArg(arg++, qs);
        kern.setArg(arg++, d);
      } else {
        kern.setArg(arg++, gguf);
      }
      if (normed) {
        kern.setArg(arg++, dq);
        kern.setArg(arg++, dd);
        kern.setArg(arg++, ds);
        kern.setArg(arg++, dss);
      } else if (i8) {
        kern.setArg(arg++, xq);
        kern.setArg(arg++, xd);
        kern.setArg(arg++, xs);
      } else {
        kern.setArg(arg++, x);
      }
      kern.setArg(arg++, y);
      if (c.kernel == "q4_gguf_i8_stage") {  // the group's rows staged in local memory
        const size_t bytes = static_cast<size_t>(c.warps) * c.nb * (k / 32) * 18;
        if (bytes > dev.getInfo<CL_DEVICE_LOCAL_MEM_SIZE>() - 1024) continue;
        kern.setArg(arg++, cl::Local(bytes));
      }
      const int rows_per_group = c.nb * c.warps;
      const size_t groups = static_cast<size_t>((n + rows_per_group - 1) / rows_per_group);
      const cl::NDRange local(32 * c.warps), global(groups * 32 * c.warps);
      q.enqueueFillBuffer(y, 0.0f, 0, static_cast<size_t>(n) * 4);
      if (normed) q.enqueueNDRangeKernel(quantize, cl::NullRange, q_global, q_local);
      q.enqueueNDRangeKernel(kern, cl::NullRange, global, local);
      std::vector<float> got(n);
      q.enqueueReadBuffer(y, CL_TRUE, 0, got.size() * 4, got.data());
      const int mode = bf ? 2 : (i8 || local_q ? 1 : 0);
      const double scale = normed || local_q ? p.rs : 1.0;
      double worst = 0;
      for (int s = 0; s < 64; ++s) {
        const long row = static_cast<long>(s) * (n - 1) / 63;
        const auto [ref, mag] = reference(p, row, mode);
        worst = std::max(worst, std::fabs(got[row] - ref * scale) / std::max(mag * scale, 1e-30));
      }
      const bool ok = worst < 1e-4;
      if (!ok) ++failures;
      // The pair's kernels are timed apart (profiled) and together (time_seq); the local form alone.
      const double us = time_it(kern, global, local);
      if (normed || local_q) {
        std::vector<std::tuple<cl::Kernel*, cl::NDRange, cl::NDRange>> seq;
        if (normed) seq.emplace_back(&quantize, q_global, q_local);
        seq.emplace_back(&kern, global, local);
        std::printf("%d x %d  %-12s nb %d unroll %d warps %d  back to back %9.1f us%s\n", n, k,
                    c.kernel.c_str(), c.nb, c.unroll, c.warps, time_seq(seq),
                    normed ? " (quantize_x + GEMV)" : "");
      }
      const double bytes = bf ? bf_bytes : q4_bytes;
      const double gbs = bytes / us / 1e3;
      std::printf("%d x %d  %-12s nb %d unroll %d warps %d %9.1f us %8.1f GB/s %5.2fx read  err %.1e%s\n", n,
                  k, c.kernel.c_str(), c.nb, c.unroll, c.warps, us, gbs, gbs / read_gbs[bf ? 1 : 0], worst,
                  ok ? "" : "  WRONG");
    }
  }
  if (failures) std::fprintf(stderr, "%d kernel configs gave wrong rows\n", failures);
  return failures ? 1 : 0;
} catch (const cl::Error& e) {
  std::fprintf(stderr, "OpenCL error %d in %s\n", e.err(), e.what());
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
