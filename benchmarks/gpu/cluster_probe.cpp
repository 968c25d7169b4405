// SPDX-License-Identifier: Apache-2.0
// Whether Hopper's thread-block clusters are reachable through NVIDIA's OpenCL, and what they
// cost. OpenCL has no launch attribute for a cluster, but a PTX kernel may carry its own cluster
// shape (`.reqnctapercluster X, Y, Z`, what CUDA's __cluster_dims__ compiles to). The probe builds
// OpenCL C whose sm_90 instructions are marked comments (as kernels/cl/mma_common.cl's
// PTX_TARGET_LINE), takes the driver's PTX, makes the marked lines live, retargets it to sm_90a,
// adds the directive to every entry and loads the result with clCreateProgramWithBinary. Then,
// for clusters of 2 and 4 along x:
// 1. ids: each group's %cluster_ctarank, %cluster_nctarank and %clusterid.x (a driver that drops
//    the directive gives rank 0 of 1 everywhere);
// 2. dsmem: a group reads its peer's local memory (mapa + ld.shared::cluster) after a cluster
//    barrier; dsstore: it writes into its peer's (st.shared::cluster);
// 3. mcast: one bulk copy (cp.async.bulk ... multicast::cluster) from global memory lands in every
//    group of the cluster, completion counted on each group's mbarrier;
// 4. the cost of a cluster barrier against a work-group barrier (device time of 1 and
//    PROBE_ITERS + 1 rounds);
// 5. stream: every cluster walks an L2-resident buffer in 16 KB chunks, each group bringing in
//    1/X of each chunk multicast to all X groups, against the same walk by single groups that
//    each fetch whole chunks (one bulk copy, 16-byte bulk copies, or cp.async as gemm_mma.cl's
//    tiles do): the bytes delivered to local memory a second, and how many of them L2 had to read.
// When step 1 finds clusters of one (what NVIDIA's OpenCL 580 does on an H200: the directive
// builds and the launch ignores it; benchmarks/RESULTS.md, "Issue 13, session 49"), the probe says
// so, skips what needs a peer and still times the single-group copies.
// Usage: prism_cluster_probe (NVIDIA only; other platforms print why and exit 0); exit 1 when a
// step that ran gave wrong data. Env: PROBE_ITERS (barrier rounds, default 10000), PROBE_MB
// (stream buffer, default 16).
#include "cl_harness.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace {

const char* const kSource = R"(
#define L(s) "// @@prism-ptx-target@@ " s "\n"
#define SMEM(p) ((uint)(size_t)(p))
inline uint rank_() { uint r; asm volatile(L("mov.u32 %0, %%cluster_ctarank;") : "=r"(r)); return r; }
inline uint nrank_() { uint r; asm volatile(L("mov.u32 %0, %%cluster_nctarank;") : "=r"(r)); return r; }
inline uint cid_() { uint r; asm volatile(L("mov.u32 %0, %%clusterid.x;") : "=r"(r)); return r; }
inline uint ncid_() { uint r; asm volatile(L("mov.u32 %0, %%nclusterid.x;") : "=r"(r)); return r; }
inline void cluster_sync_() {
  asm volatile(L("barrier.cluster.arrive;") L("barrier.cluster.wait;") ::: "memory");
}
inline void mbar_init_(__local ulong* m) {
  asm volatile(L("mbarrier.init.shared::cta.b64 [%0], 1;") L("fence.mbarrier_init.release.cluster;")
               :: "r"(SMEM(m)) : "memory");
}
inline void mbar_expect_(__local ulong* m, uint bytes) {
  asm volatile(L("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }")
               :: "r"(SMEM(m)), "r"(bytes) : "memory");
}
inline void mbar_wait_(__local ulong* m, uint parity) {
  uint done = 0;
  do {
    asm volatile(L("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;"
                   " selp.u32 %0, 1, 0, p; }")
                 : "=r"(done) : "r"(SMEM(m)), "r"(parity) : "memory");
  } while (!done);
}
// `bytes` from global `src` to the same local offset `dst` in every group of the cluster whose
// rank bit is set in `mask`, each one's mbarrier at `m`'s offset counting them.
inline void mcast_(__local void* dst, __global const void* src, uint bytes, __local ulong* m, uint mask) {
  asm volatile(L("{ .reg .b16 k; cvt.u16.u32 k, %4; cp.async.bulk.shared::cluster.global"
                 ".mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], k; }")
               :: "r"(SMEM(dst)), "l"((ulong)src), "r"(bytes), "r"(SMEM(m)), "r"(mask) : "memory");
}
inline void copy_(__local void* dst, __global const void* src, uint bytes, __local ulong* m) {
  asm volatile(L("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];")
               :: "r"(SMEM(dst)), "l"((ulong)src), "r"(bytes), "r"(SMEM(m)) : "memory");
}

__kernel void ids(__global uint* out) {
  const uint r = rank_(), n = nrank_(), c = cid_(), nc = ncid_();
  if (get_local_id(0) == 0) {
    const uint g = get_group_id(0);
    out[4 * g] = r; out[4 * g + 1] = n; out[4 * g + 2] = c; out[4 * g + 3] = nc;
  }
}

__kernel void dsmem(__global uint* out) {
  __local uint buf[128];
  const uint lid = get_local_id(0), g = get_group_id(0), r = rank_(), n = nrank_();
  buf[lid] = g * 1000u + lid;
  cluster_sync_();
  uint ra, v;
  asm volatile(L("mapa.shared::cluster.u32 %0, %1, %2;") : "=r"(ra) : "r"(SMEM(&buf[lid])), "r"((r + 1) % n));
  asm volatile(L("ld.shared::cluster.u32 %0, [%1];") : "=r"(v) : "r"(ra) : "memory");
  cluster_sync_();
  out[get_global_id(0)] = v;
}

__kernel void dsstore(__global uint* out) {
  __local uint buf[128];
  const uint lid = get_local_id(0), g = get_group_id(0), r = rank_(), n = nrank_();
  buf[lid] = 0u;
  cluster_sync_();
  uint ra;
  asm volatile(L("mapa.shared::cluster.u32 %0, %1, %2;") : "=r"(ra) : "r"(SMEM(&buf[lid])), "r"((r + 1) % n));
  asm volatile(L("st.shared::cluster.u32 [%0], %1;") :: "r"(ra), "r"(g * 1000u + lid) : "memory");
  cluster_sync_();
  out[get_global_id(0)] = buf[lid];
}

// 4 KB a cluster: rank 0 multicasts chunk clusterid to all ranks.
__kernel void mcast(__global const uint4* src, __global uint* out) {
  __local uint4 buf[256];
  __local ulong mbar;
  const uint lid = get_local_id(0), r = rank_(), n = nrank_(), c = cid_();
  if (lid == 0) mbar_init_(&mbar);
  cluster_sync_();
  if (lid == 0) {
    mbar_expect_(&mbar, 4096u);
    if (r == 0) mcast_(buf, src + 256 * c, 4096u, &mbar, (1u << n) - 1u);
  }
  mbar_wait_(&mbar, 0u);
  out[2 * get_global_id(0)] = buf[lid].x;
  out[2 * get_global_id(0) + 1] = buf[255 - lid].w;
  cluster_sync_();
}

__kernel void cbar(__global uint* out, int iters) {
  for (int i = 0; i < iters; ++i) cluster_sync_();
  if (get_global_id(0) == 0) out[0] = (uint)iters;
}

__kernel void lbar(__global uint* out, int iters) {
  for (int i = 0; i < iters; ++i) barrier(CLK_LOCAL_MEM_FENCE);
  if (get_global_id(0) == 0) out[0] = (uint)iters;
}

// Each cluster (mode 1, 2) or group (0, 3, 4) walks chunks id, id + count, ... of `chunks` 16 KB
// chunks, two buffers, the next chunk's copy issued before this one is summed. Mode 0: one bulk
// copy a chunk; 1: group r of n brings slice r (16 KB / n) multicast to all n groups; 2: the same
// slices in 16-byte bulk copies, every item issuing its share; 3: a group's own chunk in 16-byte
// bulk copies; 4: cp.async 16-byte copies (what gemm_mma.cl's tiles use), no mbarrier.
inline void piece_(__local uint4* dst, __global const uint4* src, __local ulong* m, uint mask, uint mode) {
  if (mode == 2) mcast_(dst, src, 16u, m, mask);
  else copy_(dst, src, 16u, m);
}
inline void fill_(__local uint4* dst, __global const uint4* src, __local ulong* m, uint r, uint n, uint lid,
                  uint nl, uint mode) {
  const uint slice = 1024u / n;  // uint4s
  if (mode == 4) {
    for (uint i = lid; i < 1024u; i += nl)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                   :: "r"(SMEM(dst + i)), "l"((ulong)(src + i)) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    return;
  }
  if (lid == 0) mbar_expect_(m, 16384u);
  if (mode == 0) {
    if (lid == 0) copy_(dst, src, 16384u, m);
  } else if (mode == 1) {
    if (lid == 0) mcast_(dst + r * slice, src + r * slice, slice * 16u, m, (1u << n) - 1u);
  } else {
    const uint lo = mode == 2 ? r * slice : 0u, hi = mode == 2 ? lo + slice : 1024u;
    for (uint i = lo + lid; i < hi; i += nl) piece_(dst + i, src + i, m, (1u << n) - 1u, mode);
  }
}
__kernel void stream(__global const uint4* src, int chunks, int mode, __global uint* out) {
  __local uint4 buf[2][1024];
  __local ulong mbar[2];
  const uint lid = get_local_id(0), nl = get_local_size(0), r = rank_(), n = nrank_();
  const bool multi = mode == 1 || mode == 2;
  const uint c = multi ? cid_() : get_group_id(0), nc = multi ? ncid_() : get_num_groups(0);
  if (lid == 0) { mbar_init_(&mbar[0]); mbar_init_(&mbar[1]); }
  cluster_sync_();
  uint acc = 0;
  int it = 0;
  if ((int)c < chunks) fill_(buf[0], src + 1024 * c, &mbar[0], r, n, lid, nl, (uint)mode);
  for (uint ch = c; (int)ch < chunks; ch += nc, ++it) {
    const uint nx = ch + nc, b = it & 1;
    // every group is done reading buffer b ^ 1 (the previous chunk) before anyone refills it
    if (multi) cluster_sync_(); else barrier(CLK_LOCAL_MEM_FENCE);
    if ((int)nx < chunks) fill_(buf[b ^ 1], src + 1024 * nx, &mbar[b ^ 1], r, n, lid, nl, (uint)mode);
    if (mode == 4) {
      if ((int)nx < chunks) asm volatile("cp.async.wait_group 1;" ::: "memory");
      else asm volatile("cp.async.wait_group 0;" ::: "memory");
      barrier(CLK_LOCAL_MEM_FENCE);
    } else {
      mbar_wait_(&mbar[b], (uint)(it >> 1) & 1u);
    }
    for (uint i = lid; i < 1024; i += nl) acc += buf[b][i].x ^ buf[b][i].w;
  }
  cluster_sync_();
  out[get_global_id(0)] = acc;
}
)";

// The driver's PTX with the marked lines live, .target sm_90a and `.reqnctapercluster` on every
// entry.
std::string cluster_ptx(std::string ptx, int cx) {
  ptx.resize(std::strlen(ptx.c_str()));
  const std::string marker = "// @@prism-ptx-target@@ ";
  for (std::size_t m; (m = ptx.find(marker)) != std::string::npos;) ptx.erase(m, marker.size());
  const std::size_t t = ptx.find("\n.target ");
  if (t == std::string::npos) throw std::runtime_error("the driver's binary has no .target line");
  const std::size_t e = ptx.find_first_of(", \n", t + 9);
  ptx.replace(t + 9, e - t - 9, "sm_90a");
  const std::string dir = ".reqnctapercluster " + std::to_string(cx) + ", 1, 1\n";
  for (std::size_t at = 0; (at = ptx.find(".entry ", at)) != std::string::npos;) {
    const std::size_t close = ptx.find(')', at), brace = ptx.find('{', close);
    ptx.insert(brace, dir);
    at = brace + dir.size() + 1;
  }
  return ptx;
}

}  // namespace

int main() try {
  const auto dev = cl_harness::find_device("NVIDIA");
  if (!dev) {
    std::printf("cluster_probe: no NVIDIA OpenCL device (clusters are PTX directives); skipped\n");
    return 0;
  }
  cl::Context ctx(*dev);
  cl::CommandQueue q(ctx, *dev, CL_QUEUE_PROFILING_ENABLE);
  std::printf("device %s, driver %s\n", dev->getInfo<CL_DEVICE_NAME>().c_str(),
              dev->getInfo<CL_DRIVER_VERSION>().c_str());
  cl::Program src(ctx, kSource);
  try {
    src.build({*dev});
  } catch (const cl::Error&) {
    std::printf("build log:\n%s\n", src.getBuildInfo<CL_PROGRAM_BUILD_LOG>(*dev).c_str());
    throw;
  }
  const auto bins0 = src.getInfo<CL_PROGRAM_BINARIES>();
  const std::string base(bins0.front().begin(), bins0.front().end());
  {
    const std::size_t v = base.find(".version");
    std::printf("driver PTX: %s\n", base.substr(v, base.find('\n', v) - v).c_str());
  }
  const int iters = cl_harness::env_int("PROBE_ITERS", 10000);
  const std::size_t mb = static_cast<std::size_t>(cl_harness::env_int("PROBE_MB", 16));
  const std::size_t words = mb << 18;  // uint32 words
  std::vector<std::uint32_t> host(words);
  for (std::size_t i = 0; i < words; ++i) host[i] = static_cast<std::uint32_t>(i * 2654435761u);
  cl::Buffer sbuf(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, words * 4, host.data());
  const unsigned items = 128, groups = 264;
  cl::Buffer out(ctx, CL_MEM_READ_WRITE, 2 * groups * items * 4);
  int bad = 0;
  bool formed = false;
  for (int cx : {2, 4}) {
    std::printf("\n== clusters of %d along x ==\n", cx);
    const std::string ptx = cluster_ptx(base, cx);
    cl::Program::Binaries bins{std::vector<unsigned char>(ptx.begin(), ptx.end())};
    bins.front().push_back(0);
    cl::Program prog(ctx, {*dev}, bins);
    try {
      prog.build({*dev});
    } catch (const cl::Error& e) {
      std::printf("retargeted build failed (%d):\n%s\n", e.err(),
                  prog.getBuildInfo<CL_PROGRAM_BUILD_LOG>(*dev).c_str());
      bad = 1;
      continue;
    }
    auto run = [&](cl::Kernel& k, unsigned g, const char* what) -> bool {
      try {
        q.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(g * items), cl::NDRange(items));
        q.finish();
        return true;
      } catch (const cl::Error& e) {
        std::printf("%s: launch refused: %s %d\n", what, e.what(), e.err());
        q.finish();
        return false;
      }
    };
    // Median device time of `reps` launches over the whole grid (a refused launch throws).
    auto timed_us = [&](cl::Kernel& k, int reps) {
      std::vector<double> v;
      for (int r = 0; r < reps; ++r) {
        cl::Event ev;
        q.enqueueNDRangeKernel(k, cl::NullRange, cl::NDRange(groups * items), cl::NDRange(items), nullptr,
                               &ev);
        ev.wait();
        v.push_back(cl_harness::span_us(ev, ev));
      }
      return cl_harness::median(v);
    };
    std::vector<std::uint32_t> got(2 * groups * items);
    auto read = [&] { q.enqueueReadBuffer(out, CL_TRUE, 0, got.size() * 4, got.data()); };
    // 1. ids
    cl::Kernel ids(prog, "ids");
    ids.setArg(0, out);
    bool clusters = false;  // the launch formed clusters of cx groups
    if (run(ids, groups, "ids")) {
      read();
      int ok = 0, ones = 0;
      for (unsigned g = 0; g < groups; ++g) {
        ok += got[4 * g] == g % cx && got[4 * g + 1] == static_cast<unsigned>(cx) &&
              got[4 * g + 2] == g / cx && got[4 * g + 3] == groups / cx;
        ones += got[4 * g] == 0 && got[4 * g + 1] == 1 && got[4 * g + 2] == g;
      }
      std::printf(
          "ids: %d of %u groups as a cluster of %d expects; group 3: rank %u of %u, cluster %u of %u\n", ok,
          groups, cx, got[12], got[13], got[14], got[15]);
      clusters = ok == static_cast<int>(groups);
      formed |= clusters;
      if (ones == static_cast<int>(groups))
        std::printf(
            "=> the driver built the directive and launched clusters of one group: clusters are not "
            "reachable this way; only single-group steps follow\n");
      else
        bad |= !clusters;
    }
    if (clusters) {
      cl::Kernel odd(prog, "ids");
      odd.setArg(0, out);
      std::printf("a grid of %d groups (not a multiple): ", cx + 1);
      if (run(odd, cx + 1, "odd grid")) std::printf("ran\n");
    }
    // 2. distributed local memory
    for (const char* name : {"dsmem", "dsstore"}) {
      if (!clusters) break;
      cl::Kernel k(prog, name);
      k.setArg(0, out);
      if (!run(k, groups, name)) {
        bad = 1;
        continue;
      }
      read();
      int ok = 0;
      for (unsigned g = 0; g < groups; ++g) {
        const unsigned peer =
            name[2] == 'm' ? g / cx * cx + (g % cx + 1) % cx : g / cx * cx + (g % cx + cx - 1) % cx;
        for (unsigned l = 0; l < items; ++l) ok += got[g * items + l] == peer * 1000u + l;
      }
      std::printf("%s: %d of %u items saw their peer's word\n", name, ok, groups * items);
      bad |= ok != static_cast<int>(groups * items);
    }
    // 3. multicast bulk copy
    if (clusters) {
      cl::Kernel k(prog, "mcast");
      k.setArg(0, sbuf);
      k.setArg(1, out);
      if (run(k, groups, "mcast")) {
        read();
        int ok = 0;
        for (unsigned g = 0; g < groups; ++g)
          for (unsigned l = 0; l < items; ++l) {
            const std::size_t w = 1024u * (g / cx);
            ok += got[2 * (g * items + l)] == host[w + 4 * l] &&
                  got[2 * (g * items + l) + 1] == host[w + 4 * (255 - l) + 3];
          }
        std::printf("mcast: %d of %u items read the cluster's chunk\n", ok, groups * items);
        bad |= ok != static_cast<int>(groups * items);
      } else {
        bad = 1;
      }
    }
    // 4. barrier cost
    for (const char* name : {"cbar", "lbar"}) {
      if (!clusters) break;
      cl::Kernel k(prog, name);
      k.setArg(0, out);
      double t[2] = {0, 0};
      for (int pass = 0; pass < 2; ++pass) {
        k.setArg(1, pass ? iters + 1 : 1);
        t[pass] = timed_us(k, 5);
      }
      std::printf("%s: %.1f ns a round (%d rounds %.1f us, 1 round %.1f us)\n",
                  name[0] == 'c' ? "cluster barrier" : "work-group barrier", (t[1] - t[0]) * 1e3 / iters,
                  iters, t[1], t[0]);
    }
    // 5. stream
    {
      cl::Kernel k(prog, "stream");
      const int chunks = static_cast<int>(words * 4 / 16384);
      const char* names[] = {"one bulk copy a chunk", "multicast slices", "multicast 16-byte bulk pieces",
                             "16-byte bulk pieces", "cp.async 16-byte (the GEMM's tiles)"};
      std::uint32_t want = 0;  // the chunks' words as the items sum them, modulo 2^32
      for (std::size_t j = 0; j + 3 < words; j += 4) want += host[j] ^ host[j + 3];
      for (int mode : {1, 2, 0, 3, 4}) {
        if (!clusters && (mode == 1 || mode == 2)) continue;
        k.setArg(0, sbuf);
        k.setArg(1, chunks);
        k.setArg(2, mode);
        k.setArg(3, out);
        double us = 0;
        try {
          us = timed_us(k, 7);
        } catch (const cl::Error& e) {
          std::printf("stream %s: launch refused: %s %d\n", names[mode], e.what(), e.err());
          bad = 1;
          continue;
        }
        // every item's sum over its words of its chunks: the same whichever way the chunks came
        read();
        std::uint32_t total = 0;
        for (unsigned i = 0; i < groups * items; ++i) total += got[i];
        const bool multi = mode == 1 || mode == 2;
        const double l2_bytes = double(chunks) * 16384.0;  // every chunk read from L2 once
        const double delivered = multi ? l2_bytes * cx : l2_bytes;
        const bool right = total == want * static_cast<std::uint32_t>(multi ? cx : 1);
        bad |= !right;
        std::printf("stream, %s: %.1f us; L2 read %.2f TB/s, delivered to local memory %.2f TB/s; sums %s\n",
                    names[mode], us, l2_bytes / us / 1e6, delivered / us / 1e6, right ? "right" : "WRONG");
      }
    }
  }
  std::printf("\ncluster_probe: clusters %s; %s\n", formed ? "formed" : "NOT reachable (clusters of one)",
              bad ? "SOME CHECKS FAILED" : "every step that ran checked right");
  return bad;
} catch (const cl::Error& e) {
  std::fprintf(stderr, "cluster_probe: OpenCL error %s (%d)\n", e.what(), e.err());
  return 2;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cluster_probe: %s\n", e.what());
  return 2;
}
