// SPDX-License-Identifier: Apache-2.0
// l2_prefetch_probe.cl: can a latency-bound kernel pull the next kernel's weights into L2 while it
// runs? `busy` stands for a decode step's latency-bound kernels (attention at short caches, a
// quantize step): GROUPS work-groups walk a small table with `iters` dependent loads each, so the
// kernel takes a fixed time and moves almost no DRAM bytes. With PF_MODE it also asks for
// [pf, pf + pf_bytes) in L2, split evenly over its groups:
//   0: no prefetch;
//   1: Hopper's bulk prefetch (cp.async.bulk.prefetch.L2.global), one instruction per PF_CHUNK
//      bytes issued by lane 0 of each warp, no registers held;
//   2: prefetch.global.L2 per 128-byte line, every item a line at a time.
// `readsum` stands for the GEMV that follows: every item sums 16-byte loads of [w, w + n16 * 16)
// in a grid-stride loop with UNROLL loads in flight, so it reads at the device's streaming rate.
// Build defines: PF_MODE (0/1/2), PF_CHUNK (bytes, multiple of 16), UNROLL.

#ifndef PF_MODE
#define PF_MODE 0
#endif
#ifndef PF_CHUNK
#define PF_CHUNK 65536
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

__kernel void busy(__global const uint* table, uint mask, int iters, __global uint* out,
                   __global const uchar* pf, ulong pf_bytes) {
  const uint gid = get_group_id(0), ngroups = get_num_groups(0), lid = get_local_id(0);
#if PF_MODE
  // This group's slice of the prefetch range, in 16-byte units.
  const ulong units = pf_bytes / 16, per = (units + ngroups - 1) / ngroups;
  const ulong u0 = min((ulong)gid * per, units), u1 = min(u0 + per, units);
#if PF_MODE == 1
  if (lid % 32 == 0) {
    const ulong chunk_units = PF_CHUNK / 16, warps = get_local_size(0) / 32, w = lid / 32;
    for (ulong u = u0 + w * chunk_units; u < u1; u += warps * chunk_units) {
      const uint bytes = (uint)(min(chunk_units, u1 - u) * 16);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"((ulong)(pf + u * 16)), "r"(bytes)
                   : "memory");
    }
  }
#elif PF_MODE == 2
  for (ulong line = u0 / 8 + lid; line < (u1 + 7) / 8; line += get_local_size(0))
    asm volatile("prefetch.global.L2 [%0];" ::"l"((ulong)(pf + line * 128)) : "memory");
#endif
#endif
  uint x = (gid * 977u + lid) & mask;
  for (int i = 0; i < iters; ++i) x = table[x] & mask;
  if (x == 0xFFFFFFFFu) out[0] = x;  // never true: keeps the walk
}

__kernel void readsum(__global const uint4* w, ulong n16, __global uint* out) {
  const ulong stride = get_global_size(0);
  uint4 acc = (uint4)(0);
  ulong i = get_global_id(0);
  for (; i + (UNROLL - 1) * stride < n16; i += UNROLL * stride) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = w[i + u * stride];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) acc ^= v[u];
  }
  for (; i < n16; i += stride) acc ^= w[i];
  const uint s = acc.x ^ acc.y ^ acc.z ^ acc.w;
  if (s == 0x12345678u) out[1] = s;  // almost never: keeps the loads
}
