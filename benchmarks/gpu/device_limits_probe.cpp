// SPDX-License-Identifier: Apache-2.0
// Two limits of a device that bound what its kernels can reach, measured rather than read from a
// datasheet:
// 1. Local memory a work-group can get: the static figure the driver reports
//    (CL_DEVICE_LOCAL_MEM_SIZE) and, for each size asked of a `__local` kernel argument (dynamic
//    local memory, which CUDA kernels can opt in to beyond 48 KB), whether a launch that fills and
//    reads it back runs and gives the right sums.
// 2. What an empty launch costs in device time (profiling start to end, as prism_bench_ops and
//    PyTorch's CUDA events time kernels), at 1 to 1024 groups: the floor under any one-launch op.
// Usage: prism_device_limits_probe [KB ...] (default 32 48 64 100 160 227)
// Env: HARNESS_PLATFORM (default NVIDIA), PROBE_REPS (empty launches per group count, default 41).
#include "cl_harness.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace {

const char* const kSource = R"(
__kernel void fill(__global uint* out, __local uint* buf, uint n) {
  for (uint i = get_local_id(0); i < n; i += get_local_size(0)) buf[i] = i * 2654435761u;
  barrier(CLK_LOCAL_MEM_FENCE);
  uint s = 0;
  for (uint i = get_local_id(0); i < n; i += get_local_size(0)) s += buf[n - 1 - i];
  out[get_global_id(0)] = s;
}
__kernel void empty(__global uint* out) {
  if (get_global_id(0) == 0xffffffffu) out[0] = 1u;
})";

constexpr unsigned kItems = 256;

}  // namespace

int main(int argc, char** argv) try {
  const auto dev = cl_harness::wanted_device_or_skip();
  if (!dev) return 0;
  std::vector<unsigned> sizes_kb;
  for (int i = 1; i < argc; ++i) sizes_kb.push_back(static_cast<unsigned>(std::stoul(argv[i])));
  if (sizes_kb.empty()) sizes_kb = {32, 48, 64, 100, 160, 227};
  cl::Context ctx(*dev);
  cl::CommandQueue q(ctx, *dev, CL_QUEUE_PROFILING_ENABLE);
  std::printf("device %s, driver %s; CL_DEVICE_LOCAL_MEM_SIZE %lu B\n",
              dev->getInfo<CL_DEVICE_NAME>().c_str(), dev->getInfo<CL_DRIVER_VERSION>().c_str(),
              static_cast<unsigned long>(dev->getInfo<CL_DEVICE_LOCAL_MEM_SIZE>()));
  cl::Program prog(ctx, kSource);
  prog.build({*dev});
  cl::Buffer out(ctx, CL_MEM_READ_WRITE, kItems * sizeof(unsigned));
  int wrong = 0;
  cl::Kernel fill(prog, "fill");
  for (unsigned kb : sizes_kb) {
    const unsigned n = kb * 1024 / 4;
    std::string status = "runs, sums right";
    try {
      fill.setArg(0, out);
      fill.setArg(1, cl::Local(n * sizeof(unsigned)));
      fill.setArg(2, n);
      q.enqueueNDRangeKernel(fill, cl::NullRange, cl::NDRange(kItems), cl::NDRange(kItems));
      std::vector<unsigned> got(kItems);
      q.enqueueReadBuffer(out, CL_TRUE, 0, kItems * sizeof(unsigned), got.data());
      for (unsigned t = 0; t < kItems; ++t) {
        unsigned want = 0;
        for (unsigned i = t; i < n; i += kItems) want += (n - 1 - i) * 2654435761u;
        if (want != got[t]) {
          status = "WRONG sums";
          ++wrong;
          break;
        }
      }
    } catch (const cl::Error& e) {
      status = std::string("refused: ") + e.what() + " " + std::to_string(e.err());
      q.finish();
    }
    std::printf("dynamic local memory %u KB: %s\n", kb, status.c_str());
  }
  cl::Kernel empty(prog, "empty");
  empty.setArg(0, out);
  const int reps = std::max(1, cl_harness::env_int("PROBE_REPS", 41));
  for (int groups : {1, 132, 264, 1024}) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      cl::Event ev;
      q.enqueueNDRangeKernel(empty, cl::NullRange, cl::NDRange(groups * kItems), cl::NDRange(kItems), nullptr,
                             &ev);
      ev.wait();
      t.push_back(cl_harness::span_us(ev, ev));
    }
    std::sort(t.begin(), t.end());
    std::printf("empty launch, %d groups of %u: device %.2f us (median of %d; least %.2f)\n", groups, kItems,
                cl_harness::median(t), reps, t.front());
  }
  return wrong ? 1 : 0;
} catch (const cl::Error& e) {
  std::fprintf(stderr, "OpenCL error: %s (%d)\n", e.what(), e.err());
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
