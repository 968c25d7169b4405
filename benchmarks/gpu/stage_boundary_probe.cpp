// SPDX-License-Identifier: Apache-2.0
// What a dependent stage boundary costs the device: NSTAGES stages of TASKS tiny work-groups run as
// NSTAGES launches on an in-order queue, or as one launch of stage_boundary_probe.cl's ticketed
// chain (every waiter polling one done counter, or one of NFLAGS flags raised by the group that
// completes the stage). A long `busy` kernel goes first, so the host has queued every launch before
// the device reaches them: the figures are the device's, not the host's enqueue rate. Times are
// from OpenCL profiling events on the first and last command of each run (median of PROBE_REPS).
// Every run's result is checked (each stage updates the elements the stage before wrote): a
// stage that ran early fails the probe.
// Usage: prism_stage_boundary_probe KERNEL_FILE TASKS [TASKS ...]
// Env: HARNESS_PLATFORM (default NVIDIA), PROBE_REPS (default 9), PROBE_STAGES (default 32),
// PROBE_WG (default 128), PROBE_BUSY (busy's dependent loads an item, default 8000). On NVIDIA the
// chain polls through inline PTX; elsewhere (the PoCL smoke test) through atomics, without back-off.
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
    std::fprintf(stderr, "usage: %s KERNEL_FILE TASKS [TASKS ...]\n", argv[0]);
    return 2;
  }
  const auto dev = cl_harness::wanted_device_or_skip();
  if (!dev) return 0;
  const std::string src = cl_harness::read_text(argv[1]);
  const int reps = env_int("PROBE_REPS", 9), nst = env_int("PROBE_STAGES", 32), wg = env_int("PROBE_WG", 128);
  cl::Context ctx(*dev);
  cl::CommandQueue q(ctx, *dev, CL_QUEUE_PROFILING_ENABLE);
  std::printf("device %s, driver %s; %d stages, %d-item groups\n", dev->getInfo<CL_DEVICE_NAME>().c_str(),
              dev->getInfo<CL_DRIVER_VERSION>().c_str(), nst, wg);
  const bool nv =
      cl::Platform(dev->getInfo<CL_DEVICE_PLATFORM>()).getInfo<CL_PLATFORM_NAME>().find("NVIDIA") !=
      std::string::npos;
  auto build = [&](const std::string& extra) {
    const std::string opts = extra + (nv ? " -DNV_PTX=1" : "");
    cl::Program prog(ctx, src);
    try {
      prog.build({*dev}, opts.c_str());
    } catch (const cl::Error&) {
      std::fprintf(stderr, "build failed (%s):\n%s\n", opts.c_str(),
                   prog.getBuildInfo<CL_PROGRAM_BUILD_LOG>(*dev).c_str());
      throw;
    }
    return prog;
  };
  struct form {
    std::string name, opts;
  };
  const std::vector<form> chains = {
      {"chain, one counter, sleep<=128", "-DWAIT_MODE=0 -DSLEEP_CAP=128"},
      {"chain, one counter, sleep<=512", "-DWAIT_MODE=0 -DSLEEP_CAP=512"},
      {"chain, 32 flags, sleep<=128", "-DWAIT_MODE=1 -DNFLAGS=32 -DSLEEP_CAP=128"},
      {"chain, 128 flags, sleep<=128", "-DWAIT_MODE=1 -DNFLAGS=128 -DSLEEP_CAP=128"},
      {"chain, 32 flags, sleep<=64", "-DWAIT_MODE=1 -DNFLAGS=32 -DSLEEP_CAP=64"},
  };
  cl::Program base = build("");
  std::vector<cl::Program> progs;
  for (auto& f : chains) progs.push_back(build(f.opts));

  const std::uint32_t entries = 1u << 18;
  std::vector<std::uint32_t> table = cl_harness::dependent_cycle(entries);
  cl::Buffer tbuf(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, table.size() * 4, table.data());
  cl::Buffer sink(ctx, CL_MEM_READ_WRITE, 64);
  cl::Kernel busy(base, "busy");
  busy.setArg(0, tbuf);
  busy.setArg(1, entries - 1);
  busy.setArg(2, env_int("PROBE_BUSY", 8000));
  busy.setArg(3, sink);
  const cl::NDRange busy_g(static_cast<std::size_t>(dev->getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>()) * 128),
      busy_l(128);

  // Each stage maps every element x to x / 2 + 1 (exact in float), element i by task i / wg: from
  // zeros, NSTAGES stages in order leave 2 - 2^(1 - NSTAGES) everywhere, and a task that ran before
  // the stage it waits on had finished leaves a different value.
  float expect = 0.0f;
  for (int s = 0; s < nst; ++s) expect = expect * 0.5f + 1.0f;
  int failures = 0;
  auto check = [&](cl::Buffer& buf, std::size_t n, const std::string& form) {
    std::vector<float> host(n);
    q.enqueueReadBuffer(buf, CL_TRUE, 0, n * 4, host.data());
    for (std::size_t i = 0; i < n; ++i)
      if (host[i] != expect) {
        std::printf("FAIL %s: element %zu is %g, expected %g after %d stages in order\n", form.c_str(), i,
                    static_cast<double>(host[i]), static_cast<double>(expect), nst);
        ++failures;
        return;
      }
  };
  for (int a = 2; a < argc; ++a) {
    const int tasks = std::atoi(argv[a]);
    cl::Buffer buf(ctx, CL_MEM_READ_WRITE, static_cast<std::size_t>(tasks) * wg * 4);
    q.enqueueFillBuffer(buf, 0.0f, 0, static_cast<std::size_t>(tasks) * wg * 4);
    const std::size_t ctr_ints = static_cast<std::size_t>(nst + 2) * 32,
                      flag_ints = static_cast<std::size_t>(nst) * 128 * 32;
    cl::Buffer ctr(ctx, CL_MEM_READ_WRITE, ctr_ints * 4), flags(ctx, CL_MEM_READ_WRITE, flag_ints * 4);
    std::printf("\n%d tasks a stage\n%-34s %12s %12s\n", tasks, "form", "us a stage", "span us");
    cl::Kernel work(base, "work");
    work.setArg(0, buf);
    const cl::NDRange g(static_cast<std::size_t>(tasks) * wg), l(wg);
    {
      std::vector<double> t1, tn;
      for (int r = 0; r < reps + 1; ++r) {
        cl::Event e1, en;
        q.enqueueFillBuffer(buf, 0.0f, 0, static_cast<std::size_t>(tasks) * wg * 4);
        q.enqueueNDRangeKernel(busy, cl::NullRange, busy_g, busy_l);
        q.enqueueNDRangeKernel(work, cl::NullRange, g, l, nullptr, &e1);
        for (int s = 1; s < nst; ++s)
          q.enqueueNDRangeKernel(work, cl::NullRange, g, l, nullptr, s == nst - 1 ? &en : nullptr);
        q.finish();
        check(buf, static_cast<std::size_t>(tasks) * wg, "one launch a stage");
        if (r == 0) continue;
        t1.push_back(span_us(e1, e1));
        tn.push_back(span_us(e1, en));
      }
      std::printf("%-34s %12.2f %12.2f   (one launch alone, profiled: %.2f us)\n", "one launch a stage",
                  median(tn) / nst, median(tn), median(t1));
    }
    for (std::size_t f = 0; f < chains.size(); ++f) {
      cl::Kernel ch(progs[f], "chained");
      ch.setArg(0, ctr);
      ch.setArg(1, flags);
      ch.setArg(2, tasks);
      ch.setArg(3, buf);
      const cl::NDRange cg(static_cast<std::size_t>(tasks) * nst * wg);
      std::vector<double> tn;
      for (int r = 0; r < reps + 1; ++r) {
        q.enqueueFillBuffer(ctr, 0, 0, ctr_ints * 4);
        q.enqueueFillBuffer(flags, 0, 0, flag_ints * 4);
        q.enqueueFillBuffer(buf, 0.0f, 0, static_cast<std::size_t>(tasks) * wg * 4);
        q.enqueueNDRangeKernel(busy, cl::NullRange, busy_g, busy_l);
        cl::Event e;
        q.enqueueNDRangeKernel(ch, cl::NullRange, cg, l, nullptr, &e);
        q.finish();
        check(buf, static_cast<std::size_t>(tasks) * wg, chains[f].name);
        if (r) tn.push_back(span_us(e, e));
      }
      std::printf("%-34s %12.2f %12.2f\n", chains[f].name.c_str(), median(tn) / nst, median(tn));
    }
  }
  return failures ? 1 : 0;
} catch (const cl::Error& e) {
  std::fprintf(stderr, "OpenCL error %d in %s\n", e.err(), e.what());
  return 1;
}
