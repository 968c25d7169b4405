// SPDX-License-Identifier: Apache-2.0
// stage_boundary_probe.cl: what a dependent boundary between two stages of a decode step costs on
// the device, as a kernel boundary (one launch a stage) or inside one launch (gemv_chain.cl's
// ticketed chain, where a stage's groups wait for every group of the stage before).
// - `work`: one stage's TASKS groups as their own launch; each item reads and writes one value.
// - `chained`: NSTAGES stages of TASKS groups in one launch. A group takes a ticket (in start
//   order, so it only ever waits on groups already running), waits for stage s - 1, works, and
//   counts itself done. WAIT_MODE 0: every waiter polls stage s - 1's one done counter (the form
//   gemv_chain.cl has); 1: the group that completes a stage raises NFLAGS flags on their own
//   128-byte lines and each waiter polls flag (ticket % NFLAGS), so no line takes every poll.
// Counters and flags are zeroed by the host before each launch. Polls back off with nanosleep
// from 64 ns to SLEEP_CAP ns (NVIDIA inline PTX).
// Build defines: WAIT_MODE (0/1), NFLAGS, SLEEP_CAP, STRIDE (ints between two counters/flags),
// NV_PTX (0/1).

#ifndef WAIT_MODE
#define WAIT_MODE 0
#endif
#ifndef NFLAGS
#define NFLAGS 32
#endif
#ifndef SLEEP_CAP
#define SLEEP_CAP 128
#endif
#ifndef STRIDE
#define STRIDE 32
#endif

__kernel void busy(__global const uint* table, uint mask, int iters, __global uint* out) {
  uint x = (get_group_id(0) * 977u + get_local_id(0)) & mask;
  for (int i = 0; i < iters; ++i) x = table[x] & mask;
  if (x == 0xFFFFFFFFu) out[0] = x;
}

__kernel void work(__global float* buf) {
  const size_t i = get_global_id(0);
  buf[i] = buf[i] * 0.5f + 1.0f;
}

// NV_PTX (the host sets it on NVIDIA's platform): GPU-scope relaxed loads, fences and nanosleep
// through inline PTX; elsewhere (the PoCL smoke test) an atomic read, mem_fence and no back-off.
#ifndef NV_PTX
#define NV_PTX 0
#endif
inline int peek(volatile __global int* c) {
#if NV_PTX
  int v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
  return v;
#else
  return atomic_add(c, 0);
#endif
}
inline void fence_gpu(void) {
#if NV_PTX
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
  mem_fence(CLK_GLOBAL_MEM_FENCE);
#endif
}
inline void back_off(uint ns) {
#if NV_PTX
  asm volatile("nanosleep.u32 %0;" ::"r"(ns));
#else
  (void)ns;
#endif
}

__kernel void chained(__global int* ctr, __global int* flags, int tasks, __global float* buf) {
  __local int ticket_l;
  const int lid = get_local_id(0);
  if (lid == 0) ticket_l = atomic_inc(ctr);
  barrier(CLK_LOCAL_MEM_FENCE);
  const int ticket = ticket_l, stage = ticket / tasks, task = ticket % tasks;
  if (stage > 0 && lid == 0) {
#if WAIT_MODE == 0
    volatile __global int* w = ctr + stage * STRIDE;  // stage - 1's done count
    const int target = tasks;
#else
    volatile __global int* w = flags + ((stage - 1) * NFLAGS + task % NFLAGS) * STRIDE;
    const int target = 1;
#endif
    uint ns = 64;
    while (peek(w) < target) {
      back_off(ns);
      ns = min(ns * 2, (uint)SLEEP_CAP);
    }
    fence_gpu();
  }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  const size_t i = (size_t)task * get_local_size(0) + lid;
  buf[i] = buf[i] * 0.5f + 1.0f;
  barrier(CLK_GLOBAL_MEM_FENCE);
  if (lid == 0) {
    fence_gpu();
    const int done = atomic_inc(ctr + (stage + 1) * STRIDE);
#if WAIT_MODE == 1
    if (done == tasks - 1) {
      fence_gpu();
      for (int f = 0; f < NFLAGS; ++f) ((volatile __global int*)flags)[(stage * NFLAGS + f) * STRIDE] = 1;
    }
#else
    (void)done;
#endif
  }
}
