// SPDX-License-Identifier: Apache-2.0
// Two limits of a device that bound what its kernels can reach, measured rather than read from a
// datasheet:
// 1. Local memory a work-group can get: the static figure the driver reports
//    (CL_DEVICE_LOCAL_MEM_SIZE) and, for each size asked of a `__local` kernel argument (dynamic
//    local memory, which CUDA kernels can opt in to beyond 48 KB), whether a launch that fills and
//    reads it back runs and gives the right sums.
// 2. What an empty launch costs in device time (profiling start to end, as prism_bench_ops and
//    PyTorch's CUDA events time kernels), at 1 to 1024 groups: the floor under any one-launch op.
// 3. What a launch costs by its arguments: chains of PROBE_CHAIN dependent launches of a tiny
//    kernel taking 1 to 16 distinct buffers (a decode step's kernels take up to 10), the same
//    buffer 16 times, or one buffer and 24 scalars. For each: the host's enqueue time a launch
//    (the chain queued behind a long kernel, so the device runs none of it yet), the device's time
//    a launch (first start to last end of that chain), and the wall time a launch when the host
//    streams 8 chains back to back (the pipelined floor a graph replay meets).
// Usage: prism_device_limits_probe [KB ...] (default 32 48 64 100 160 227)
// Env: HARNESS_PLATFORM (default NVIDIA), PROBE_REPS (empty launches per group count, and chains
// per argument form, default 41), PROBE_CHAIN (launches a chain, default 64), PROBE_BUSY (the long
// kernel's dependent loads an item, default 8000).
#include "cl_harness.hpp"

#include <chrono>
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
}
__kernel void busy(__global const uint* table, uint mask, int iters, __global uint* out) {
  uint x = (get_group_id(0) * 977u + get_local_id(0)) & mask;
  for (int i = 0; i < iters; ++i) x = table[x] & mask;
  if (x == 0xffffffffu) out[0] = x;
})";

constexpr unsigned kItems = 256;

// A tiny kernel `args` over `bufs` buffers (b0 written, the rest read where flag says) and
// `scalars` ints, each read where the compiler cannot prove it unused: x -> x / 2 + 1 on b0.
std::string args_kernel(int bufs, int scalars) {
  std::string params = "__global float* b0", sum;
  for (int i = 1; i < bufs; ++i) {
    params += ", __global const float* b" + std::to_string(i);
    sum += " + b" + std::to_string(i) + "[i]";
  }
  for (int i = 0; i < scalars; ++i) {
    params += ", int s" + std::to_string(i);
    sum += " + (float)s" + std::to_string(i);
  }
  return "__kernel void args(" + params + ", int flag) {\n  const size_t i = get_global_id(0);\n" +
         "  float v = b0[i] * 0.5f + 1.0f;\n  if (flag) v += 0.0f" + sum + ";\n  b0[i] = v;\n}\n";
}

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

  // 3. Launch cost by arguments.
  const int chain = std::max(2, cl_harness::env_int("PROBE_CHAIN", 64));
  const std::uint32_t entries = 1u << 18;
  std::vector<std::uint32_t> table = cl_harness::dependent_cycle(entries);
  cl::Buffer tbuf(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, table.size() * 4, table.data());
  cl::Kernel busy(prog, "busy");
  busy.setArg(0, tbuf);
  busy.setArg(1, entries - 1);
  busy.setArg(2, cl_harness::env_int("PROBE_BUSY", 8000));
  busy.setArg(3, out);
  const std::size_t cus = dev->getInfo<CL_DEVICE_MAX_COMPUTE_UNITS>();
  const std::size_t n = cus * 128;  // one 128-item group a compute unit
  std::vector<cl::Buffer> bufs;
  for (int i = 0; i < 16; ++i) {
    bufs.emplace_back(ctx, CL_MEM_READ_WRITE, n * sizeof(float));
    q.enqueueFillBuffer(bufs.back(), 0.0f, 0, n * sizeof(float));
  }
  struct form {
    const char* name;
    int bufs, scalars;
    bool same;
  };
  using clock = std::chrono::steady_clock;
  auto us = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::micro>(b - a).count();
  };
  std::printf("\nlaunch cost by arguments: %d-launch chains of %zu groups of 128 items\n", chain, cus);
  std::printf("%-28s %14s %14s %16s\n", "arguments", "host enqueue", "device a launch", "pipelined wall");
  for (const form& f :
       {form{"1 buffer", 1, 0, false}, form{"4 buffers", 4, 0, false}, form{"8 buffers", 8, 0, false},
        form{"12 buffers", 12, 0, false}, form{"16 buffers", 16, 0, false},
        form{"one buffer 16 times", 16, 0, true}, form{"1 buffer, 24 ints", 1, 24, false}}) {
    cl::Program p(ctx, args_kernel(f.bufs, f.scalars));
    p.build({*dev});
    cl::Kernel k(p, "args");
    for (int i = 0; i < f.bufs; ++i) k.setArg(i, f.same ? bufs[0] : bufs[i]);
    for (int i = 0; i < f.scalars; ++i) k.setArg(f.bufs + i, i);
    k.setArg(f.bufs + f.scalars, 0);
    const cl::NDRange g(n), l(128);
    std::vector<double> host, device, wall;
    for (int r = 0; r < reps + 1; ++r) {
      q.enqueueNDRangeKernel(busy, cl::NullRange, cl::NDRange(cus * 128), cl::NDRange(128));
      cl::Event first, last;
      const auto t0 = clock::now();
      for (int s = 0; s < chain; ++s)
        q.enqueueNDRangeKernel(k, cl::NullRange, g, l, nullptr,
                               s == 0           ? &first
                               : s == chain - 1 ? &last
                                                : nullptr);
      const auto t1 = clock::now();
      q.finish();
      if (r == 0) continue;  // the first run builds and warms
      host.push_back(us(t0, t1) / chain);
      device.push_back(cl_harness::span_us(first, last) / chain);
    }
    for (int r = 0; r < 3; ++r) {
      q.finish();
      const auto t0 = clock::now();
      for (int s = 0; s < 8 * chain; ++s) q.enqueueNDRangeKernel(k, cl::NullRange, g, l);
      q.finish();
      wall.push_back(us(t0, clock::now()) / (8 * chain));
    }
    std::vector<float> got(n);
    q.enqueueReadBuffer(bufs[0], CL_TRUE, 0, n * sizeof(float), got.data());
    if (!(got[0] > 1.0f && got[0] <= 2.0f)) {
      std::printf("WRONG: b0[0] is %g after the chains (x -> x / 2 + 1 from 0 stays in (1, 2])\n",
                  static_cast<double>(got[0]));
      ++wrong;
    }
    std::printf("%-28s %11.2f us %11.2f us %13.2f us\n", f.name, cl_harness::median(host),
                cl_harness::median(device), cl_harness::median(wall));
  }
  return wrong ? 1 : 0;
} catch (const cl::Error& e) {
  std::fprintf(stderr, "OpenCL error: %s (%d)\n", e.what(), e.err());
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
