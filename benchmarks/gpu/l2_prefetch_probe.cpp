// SPDX-License-Identifier: Apache-2.0
// Can a latency-bound kernel pull the next kernel's weights into L2 while it runs, and does the
// next kernel then read them faster? A decode step on the GPU alternates GEMVs that stream cold
// weights with kernels that move few bytes (attention at short caches, quantize steps), during
// which DRAM idles. This probe times, with OpenCL profiling events, l2_prefetch_probe.cl's `busy`
// (a fixed-time, latency-bound kernel) followed by `readsum` (a streaming read of R bytes):
//   - readsum alone on cold buffers (each rep reads the next of a pool far larger than L2) and
//     on one warm buffer;
//   - busy then readsum, with busy prefetching nothing, the buffer readsum reads next (bulk or
//     per-line), or another buffer (the prefetch's cost when it misses).
// Per case: the median over PROBE_REPS reps of busy's time, readsum's time and their span
// (busy's start to readsum's end). No prism dispatch involved.
// Usage: prism_l2_prefetch_probe KERNEL_FILE MB [MB ...]
// Env: HARNESS_PLATFORM (default NVIDIA), PROBE_REPS (default 30), PROBE_ITERS (busy's dependent
// loads an item, default 32), PROBE_POOL_MB (default 640), PROBE_MODES (prefetch forms, default "1,2" on
// NVIDIA, none elsewhere: they are inline PTX).
#include "cl_harness.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using cl_harness::env_int;
using cl_harness::median;
using cl_harness::span_us;

int main(int argc, char** argv) try {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s KERNEL_FILE MB [MB ...]\n", argv[0]);
    return 2;
  }
  const auto dev = cl_harness::wanted_device_or_skip();
  if (!dev) return 0;
  const std::string src = cl_harness::read_text(argv[1]);
  const int reps = env_int("PROBE_REPS", 30), iters = env_int("PROBE_ITERS", 32);
  const std::size_t pool_bytes = static_cast<std::size_t>(env_int("PROBE_POOL_MB", 640)) << 20;
  std::vector<int> modes;
  {
    const bool nv = dev->getInfo<CL_DEVICE_VENDOR>().find("NVIDIA") != std::string::npos;
    std::string m = std::getenv("PROBE_MODES") ? std::getenv("PROBE_MODES") : nv ? "1,2" : "";
    for (std::size_t p = 0; p < m.size();) {
      modes.push_back(std::atoi(m.c_str() + p));
      const std::size_t c = m.find(',', p);
      p = c == std::string::npos ? m.size() : c + 1;
    }
  }
  cl::Context ctx(*dev);
  cl::CommandQueue q(ctx, *dev, CL_QUEUE_PROFILING_ENABLE);
  const int cus = static_cast<int>(dev->getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>());
  std::printf("device %s, %d compute units, driver %s\n", dev->getInfo<CL_DEVICE_NAME>().c_str(), cus,
              dev->getInfo<CL_DRIVER_VERSION>().c_str());

  auto build = [&](int mode) -> cl::Program {
    cl::Program prog(ctx, src);
    const std::string opts = "-DPF_MODE=" + std::to_string(mode);
    try {
      prog.build({*dev}, opts.c_str());
    } catch (const cl::Error&) {
      std::printf("PF_MODE=%d does not build:\n%s\n", mode,
                  prog.getBuildInfo<CL_PROGRAM_BUILD_LOG>(*dev).c_str());
      return cl::Program();
    }
    if (mode == 1) {  // the PTX version the driver emits (inline PTX must fit it)
      const auto bins = prog.getInfo<CL_PROGRAM_BINARIES>();
      if (!bins.empty()) {
        const std::string ptx(bins[0].begin(), bins[0].end());
        const auto v = ptx.find(".version");
        const auto t = ptx.find(".target");
        if (v != std::string::npos) std::printf("PTX %s", ptx.substr(v, ptx.find('\n', v) - v + 1).c_str());
        if (t != std::string::npos) std::printf("PTX %s", ptx.substr(t, ptx.find('\n', t) - t + 1).c_str());
      }
    }
    return prog;
  };
  cl::Program base = build(0);
  std::vector<std::pair<int, cl::Program>> pf_progs;
  for (int m : modes)
    if (cl::Program p = build(m); p()) pf_progs.emplace_back(m, p);

  // busy's table: a random cycle over 2^18 entries (1 MiB, L2-resident), so each load depends on
  // the one before.
  const std::uint32_t entries = 1u << 18;
  std::vector<std::uint32_t> table = cl_harness::dependent_cycle(entries);
  cl::Buffer tbuf(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, table.size() * 4, table.data());
  cl::Buffer out(ctx, CL_MEM_READ_WRITE, 64);
  const cl::NDRange busy_global(static_cast<std::size_t>(cus) * 128), busy_local(128);
  const cl::NDRange read_global(static_cast<std::size_t>(cus) * 8 * 256), read_local(256);

  for (int a = 2; a < argc; ++a) {
    const double mb = std::atof(argv[a]);
    const std::size_t bytes = static_cast<std::size_t>(mb * 1e6) / 4096 * 4096;
    const int nbuf = static_cast<int>(std::max<std::size_t>(3, pool_bytes / bytes));
    std::vector<cl::Buffer> pool;
    for (int b = 0; b < nbuf; ++b) {
      pool.emplace_back(ctx, CL_MEM_READ_WRITE, bytes);
      q.enqueueFillBuffer(pool.back(), static_cast<cl_uint>(b * 2654435761u), 0, bytes);
    }
    q.finish();
    const cl_ulong n16 = bytes / 16;
    std::printf(
        "\n%.1f MB read, pool of %d buffers (%.0f MB), busy %d groups x 128 items, %d loads an item\n",
        bytes / 1e6, nbuf, nbuf * bytes / 1e6, cus, iters);
    std::printf("%-34s %10s %10s %10s %8s\n", "case", "busy us", "read us", "span us", "read TB/s");

    // kind: 0 read only; 1 busy + read. pf_target: -1 none, 0 the buffer read next, 1 another.
    auto run = [&](const char* name, cl::Program* prog, int kind, int pf_target, bool warm) {
      cl::Kernel busy(prog ? *prog : base, "busy"), rd(base, "readsum");
      std::vector<double> tb, tr, ts;
      for (int r = -3; r < reps; ++r) {  // three unrecorded warm-up reps
        const int b = warm ? 0 : (r + 3) % nbuf;
        cl::Event eb, er;
        if (kind == 1) {
          const cl::Buffer& pfb = pool[pf_target == 1 ? (b + nbuf / 2) % nbuf : b];
          busy.setArg(0, tbuf);
          busy.setArg(1, entries - 1);
          busy.setArg(2, iters);
          busy.setArg(3, out);
          busy.setArg(4, pfb);
          busy.setArg(5, static_cast<cl_ulong>(pf_target < 0 ? 0 : bytes));
          q.enqueueNDRangeKernel(busy, cl::NullRange, busy_global, busy_local, nullptr, &eb);
        }
        rd.setArg(0, pool[b]);
        rd.setArg(1, n16);
        rd.setArg(2, out);
        q.enqueueNDRangeKernel(rd, cl::NullRange, read_global, read_local, nullptr, &er);
        q.finish();  // each rep starts from an idle device, as a decode kernel after a sync does not;
                     // the span below is the device's, so the host's gap does not count
        if (r < 0) continue;
        tr.push_back(span_us(er, er));
        if (kind == 1) {
          tb.push_back(span_us(eb, eb));
          ts.push_back(span_us(eb, er));
        }
      }
      const double rmed = median(tr);
      std::printf("%-34s %10.2f %10.2f %10.2f %8.2f\n", name, kind ? median(tb) : 0.0, rmed,
                  kind ? median(ts) : rmed, bytes / rmed / 1e6);
    };
    run("read, cold", nullptr, 0, -1, false);
    run("read, warm (same buffer)", nullptr, 0, -1, true);
    run("busy + read, no prefetch", nullptr, 1, -1, false);
    for (auto& [m, p] : pf_progs) {
      const std::string mode = m == 1 ? "bulk" : "lines";
      run(("busy(" + mode + " pf next) + read").c_str(), &p, 1, 0, false);
      run(("busy(" + mode + " pf other) + read").c_str(), &p, 1, 1, false);
    }
  }
  return 0;
} catch (const cl::Error& e) {
  std::fprintf(stderr, "OpenCL error %d in %s\n", e.err(), e.what());
  return 1;
}
