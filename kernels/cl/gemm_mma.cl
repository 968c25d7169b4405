// SPDX-License-Identifier: Apache-2.0
// prism GEMM on NVIDIA tensor cores through inline PTX `mma.sync` (sm_80+): C = alpha * A@B +
// beta * bias with f32 accumulation. PRISM_DTYPE 0: f32 storage, TF32 m16n8k8 (the hardware
// reads the top 19 bits of each f32: TF32 rounding by truncation, opt-in only); 1: f16 and
// 2: bf16 storage (16-bit bit patterns, no cl_khr_fp16 needed), m16n8k16.
// Tiling: a 1-D work-group of 32 * WARPS_M * WARPS_N work-items computes a BM x BN tile of C;
// warp (wm, wn) owns a (BM/WARPS_M) x (BN/WARPS_N) sub-tile of 16x8 mma tiles. Per BK-step the
// A slice is stored as As[m][k] and the B slice as Bs[n][k] (both k-contiguous, rows padded by 4
// words so a fragment load's 8 rows x 4 words hit 32 distinct banks), in two local buffers: the
// next slice is fetched (16-byte global loads) into registers while this one is multiplied.
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k8 / m16n8k16"), g = lane/4,
// t = lane%4, in 32-bit words of a k-row: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
// b0 (n=g, t), b1 (n=g, t+4); c0 c1 (g, 2t, 2t+1), c2 c3 (g+8, 2t, 2t+1). One word is one tf32
// or two 16-bit values, so both shapes read the same words.
// LDSM=1 reads fragments with ldmatrix (one instruction per 4 words instead of 4 loads);
// CPASYNC=1 (B k-contiguous only) fills STAGES local buffers with cp.async instead of going
// through registers.
// WGMMA=1 (Hopper, sm_90a; built with -prism-ptx-target=sm_90a, see mma_common.cl): each
// warpgroup (4 warps) owns 64 rows x BN and issues `wgmma.mma_async m64nBNk16` (k8 for TF32)
// with both operands read by the tensor cores straight from local memory through matrix
// descriptors. A slice is stored row by row, BK * ES bytes a row (32, 64 or 128: the swizzle
// width W), with the 16-byte chunks of each row permuted as wgmma's W-byte swizzle mode reads
// them (byte offset bits 4.. XOR bits 7..), so its reads and the cp.async writes that fill it
// are free of bank conflicts (the unswizzled "core matrix" layout measured 1.3-2x slower;
// RESULTS.md, "Issue 13, session 15"). Needs CPASYNC, WARPS_N 1 and WARPS_M = BM / 16 (BM 64,
// 128 or 256); the accumulators of a warp are then the
// mma.sync C fragments of its 16 rows, so the epilogue below serves both. WG_WAIT=1 leaves a
// slice's wgmma running under the next slice's barrier and copy issue (needs STAGES >= 3; the
// copies then run STAGES - 2 slices ahead instead of STAGES - 1).
// Build defines: PRISM_DTYPE, BM, BN, BK (elements), WARPS_M, WARPS_N, B_NCONTIG (0/1),
// HAS_BIAS, LDSM, CPASYNC, STAGES, WGMMA, WG_WAIT, SPLITK (> 1: f32 partial sums to a workspace, then
// gemm_mma_reduce, built with -DREDUCE). A must be k-contiguous; row strides and offsets multiples of
// 16 bytes; STAGES * (BM + BN) * (BK * size + 16) bytes of local memory (WGMMA: no padding,
// STAGES * (BM + BN) * BK * size).

#include "gemm_common.cl"  // storage type GT, epilogue (resolved by build_kernel)

#include "mma_common.cl"  // mma_tile, MMA_SMEM

#ifndef LDSM
#define LDSM 0
#endif
#ifndef CPASYNC
#define CPASYNC 0
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef SPLITK
#define SPLITK 1
#endif
#ifndef WGMMA
#define WGMMA 0
#endif
#ifndef WG_WAIT
#define WG_WAIT 0
#endif

#if PRISM_DTYPE == 0
typedef float ST;
#define ES 4
#else
typedef ushort ST;
#define ES 2
#endif
#define VE (16 / ES)        // elements per 16-byte vector
#define BKW (BK * ES / 4)   // 32-bit words per k-row of a slice
#define SW (BKW + 4)        // padded row stride in words
#define NT (32 * WARPS_M * WARPS_N)
#define WTM (BM / WARPS_M)
#define WTN (BN / WARPS_N)
#define MT (WTM / 16)
#define NTL (WTN / 8)
#define A_VECS (BM * BK / VE)
#define B_VECS (BN * BK / VE)
#define A_PER ((A_VECS + NT - 1) / NT)
#define B_PER ((B_VECS + NT - 1) / NT)

#if WGMMA
#if !CPASYNC || WARPS_N != 1 || BM != 16 * WARPS_M || BM % 64 != 0
#error "WGMMA needs CPASYNC, WARPS_N 1 and WARPS_M = BM / 16 with BM a multiple of 64"
#endif
#if WG_WAIT && STAGES < 3
#error "WG_WAIT 1 needs STAGES >= 3"
#endif
#define KC (BK * ES / 16)  // 16-byte chunks in a k-row of a slice
#define WG_STEPS (BK * ES / 32)  // wgmma k-steps a slice: 32 bytes of k each (k16 16-bit, k8 tf32)
#if KC != 2 && KC != 4 && KC != 8
#error "WGMMA's swizzled layout needs BK * ES of 32, 64 or 128 bytes"
#endif
// A local address in a row-major slice, swizzled: its chunk bits (4..) XOR its bits 7.. (the
// 128-byte line within the 8-row repeat of W * 8 bytes), as the hardware does to the addresses
// it forms.
#define WG_SWZ(off) ((off) ^ ((((off) >> 7) & (KC - 1)) << 4))
// Matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address, leading offset
// (unused by swizzled K-major layouts: 1), stride offset (8-row groups, 8 * W bytes), all in
// 16-byte units; base offset 0 (slices aligned to their repeat); layout type W = 128: 1, 64: 2,
// 32: 3. A k-step moves the start address 32 bytes along the row; the hardware swizzles the
// address it forms.
inline ulong wg_desc(uint addr) {
  return (ulong)((addr & 0x3FFFFu) >> 4) | ((ulong)1 << 16) | ((ulong)((KC * 128) >> 4) << 32) |
         ((ulong)(KC == 8 ? 1 : KC == 4 ? 2 : 3) << 62);
}
#define WG_STEP_BYTES 32
#define WG_STR_(x) #x
#define WG_STR(x) WG_STR_(x)
#if PRISM_DTYPE == 0
#define WG_INSN "wgmma.mma_async.sync.aligned.m64n" WG_STR(BN) "k8.f32.tf32.tf32 "
#define WG_IMM ", 1, 1;"
#elif PRISM_DTYPE == 1
#define WG_INSN "wgmma.mma_async.sync.aligned.m64n" WG_STR(BN) "k16.f32.f16.f16 "
#define WG_IMM ", 1, 1, 0, 0;"
#else
#define WG_INSN "wgmma.mma_async.sync.aligned.m64n" WG_STR(BN) "k16.f32.bf16.bf16 "
#define WG_IMM ", 1, 1, 0, 0;"
#endif
// The accumulator operands: register 4j + e of the m64nBN fragment is acc[0][j][e] (row g + 8 *
// (e / 2), column 8j + 2t + e % 2 of the warp's 16 rows, as an mma.sync C fragment); WG_ACC8
// lists the four of column group j, WG_ACC64 those of eight groups from j.
#define WG_ACC8(acc, j) "+f"(acc[0][j][0]), "+f"(acc[0][j][1]), "+f"(acc[0][j][2]), "+f"(acc[0][j][3])
#define WG_ACC64(acc, j)                                                                      \
  WG_ACC8(acc, j), WG_ACC8(acc, j + 1), WG_ACC8(acc, j + 2), WG_ACC8(acc, j + 3), WG_ACC8(acc, j + 4), \
      WG_ACC8(acc, j + 5), WG_ACC8(acc, j + 6), WG_ACC8(acc, j + 7)
#if BN == 64
#define WG_D "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WG_DESC_A "%32"
#define WG_DESC_B "%33"
#define WG_SCALE_D "%34"
#define WG_D_OPS(acc) WG_ACC64(acc, 0)
#elif BN == 128
#define WG_D "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WG_DESC_A "%64"
#define WG_DESC_B "%65"
#define WG_SCALE_D "%66"
#define WG_D_OPS(acc) WG_ACC64(acc, 0), WG_ACC64(acc, 8)
#elif BN == 256
#define WG_D "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define WG_DESC_A "%128"
#define WG_DESC_B "%129"
#define WG_SCALE_D "%130"
#define WG_D_OPS(acc) WG_ACC64(acc, 0), WG_ACC64(acc, 8), WG_ACC64(acc, 16), WG_ACC64(acc, 24)
#else
#error "WGMMA takes BN 64, 128 or 256"
#endif
// One slice: the warpgroup's WG_STEPS wgmma on local buffers a (its 64 rows) and b, then waits
// until at most WG_WAIT groups (slices) are pending (a buffer is refilled only after every
// warpgroup's wait for it, which the barrier at the top of the main loop orders).
#define WG_SLICE(acc, a_addr, b_addr)                                                                \
  asm volatile(PTX_TARGET_LINE("wgmma.fence.sync.aligned;") ::: "memory");                          \
  _Pragma("unroll") for (int ks = 0; ks < WG_STEPS; ++ks) {                                         \
    const ulong da = wg_desc((a_addr) + ks * WG_STEP_BYTES), db = wg_desc((b_addr) + ks * WG_STEP_BYTES); \
    asm volatile("{\n" PTX_TARGET_LINE(".reg .pred p;") PTX_TARGET_LINE("setp.ne.b32 p, " WG_SCALE_D ", 0;") \
                 PTX_TARGET_LINE(WG_INSN WG_D ", " WG_DESC_A ", " WG_DESC_B ", p" WG_IMM) "}\n"        \
                 : WG_D_OPS(acc)                                                                    \
                 : "l"(da), "l"(db), "r"(1));                                                        \
  }                                                                                                 \
  asm volatile(PTX_TARGET_LINE("wgmma.commit_group.sync.aligned;") ::: "memory");                   \
  asm volatile(PTX_TARGET_LINE("wgmma.wait_group.sync.aligned " WG_STR(WG_WAIT) ";") ::: "memory")
#endif

// 16 bytes of a row-contiguous operand starting at element `pos`; elements at or past `lim`
// read as 0.
inline uint4 mma_load16(__global const ST* p, int pos, int lim) {
  if (pos + VE <= lim) return *(__global const uint4*)p;  // 16-byte aligned (supports())
  ST e[VE];
#pragma unroll
  for (int i = 0; i < VE; ++i) e[i] = pos + i < lim ? p[i] : (ST)0;
#if ES == 4
  return as_uint4(vload4(0, e));
#else
  return as_uint4(vload8(0, e));
#endif
}

// Element i of 16 bytes held as 4 words.
inline ST mma_elem(const uint* w, int i) {
#if ES == 4
  return as_float(w[i]);
#else
  return (ushort)(w[i / 2] >> (16 * (i % 2)));
#endif
}


// ldmatrix .x4: lane l names row (l % 8) of 8x8 b16 matrix l / 8; register q of each lane gets
// word (lane % 4) of row (lane / 4) of matrix q. With 32-bit words that is the tf32 layout too.
#define MMA_LDSM4(r0, r1, r2, r3, addr)                                                    \
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"           \
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)                                    \
               : "r"(addr))
#define MMA_LDSM2(r0, r1, addr)                                                            \
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(addr))

// cp.async: 16 bytes global -> local without registers; bytes past `src_bytes` are zero-filled.
inline void mma_cp16(uint dst, __global const ST* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"((ulong)src), "r"(src_bytes)
               : "memory");
}
#define MMA_CP_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
#define MMA_CP_WAIT_(n) asm volatile("cp.async.wait_group " #n ";" ::: "memory")
#define MMA_CP_WAIT(n) MMA_CP_WAIT_(n)

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void gemm_mma(int M, int N, int K, float alpha, float beta,
              __global const GT* A_, long a_off, int sam, int sak, long sab,
              __global const GT* B_, long b_off, int sbk, int sbn, long sbb,
              __global GT* C, long c_off, int scm, long scb,
              __global const GT* X, long x_off, int sxm, int sxn) {
#if WGMMA
  __local uint As[STAGES][BM * BKW] __attribute__((aligned(1024)));
  __local uint Bs[STAGES][BN * BKW] __attribute__((aligned(1024)));
  // Copy v: row v / KC, chunk v % KC (a warp reads whole rows of global memory).
#define MMA_SLOT(v, mm, kk) const int mm = (v) / KC, kk = ((v) % KC) * VE
#define MMA_A_DST(buf, v, mm, kk) WG_SWZ(MMA_SMEM(&As[buf][0]) + (v) * 16)
#define MMA_B_DST(buf, v, nn, kk) WG_SWZ(MMA_SMEM(&Bs[buf][0]) + (v) * 16)
#else
#define MMA_SLOT(v, mm, kk) const int mm = (v) / (BK / VE), kk = ((v) % (BK / VE)) * VE
  __local uint As[STAGES][BM][SW] __attribute__((aligned(16)));
  __local uint Bs[STAGES][BN][SW] __attribute__((aligned(16)));
#define MMA_A_DST(buf, v, mm, kk) MMA_SMEM(&As[buf][mm][(kk) * ES / 4])
#define MMA_B_DST(buf, v, nn, kk) MMA_SMEM(&Bs[buf][nn][(kk) * ES / 4])
#endif
  const int tid = get_local_id(0);
  const int lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const int n0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM;
#if SPLITK > 1
  // Split-K: dim 2 is batch * SPLITK; split s sums its BK-aligned K range into its own f32 slab
  // of the workspace C (slabs batch * scb apart); gemm_mma_reduce adds them up.
  const int split = get_group_id(2) % SPLITK;
  const long bt = get_group_id(2) / SPLITK;
  const int kchunk = ((K + SPLITK - 1) / SPLITK + BK - 1) / BK * BK;
  const int kbeg = min(K, split * kchunk), kend = min(K, kbeg + kchunk);
  __global float* W = (__global float*)C + c_off + ((long)split * (get_num_groups(2) / SPLITK) + bt) * scb;
#else
  const long bt = get_group_id(2);
  const int kbeg = 0, kend = K;
  C += c_off + bt * scb;
#endif
  __global const ST* A = (__global const ST*)A_ + a_off + bt * sab;
  __global const ST* B = (__global const ST*)B_ + b_off + bt * sbb;

  uint4 ra[A_PER], rb[B_PER];
#define MMA_FETCH(k0)                                                                   \
  _Pragma("unroll") for (int r = 0; r < A_PER; ++r) {                               \
    const int v = tid + r * NT;                                                     \
    ra[r] = (uint4)(0u);                                                            \
    if (A_VECS % NT == 0 || v < A_VECS) {                                           \
      const int mm = v / (BK / VE), kk = (v % (BK / VE)) * VE;                      \
      const int m = m0 + mm, k = (k0) + kk;                                         \
      if (m < M) ra[r] = mma_load16(A + (long)m * sam + k, k, kend);                   \
    }                                                                               \
  }                                                                                 \
  _Pragma("unroll") for (int r = 0; r < B_PER; ++r) {                               \
    const int v = tid + r * NT;                                                     \
    rb[r] = (uint4)(0u);                                                            \
    if (B_VECS % NT == 0 || v < B_VECS) {                                           \
      if (B_NCONTIG) {                                                              \
        const int kk = v / (BN / VE), nn = (v % (BN / VE)) * VE;                    \
        const int n = n0 + nn, k = (k0) + kk;                                       \
        if (k < kend) rb[r] = mma_load16(B + (long)k * sbk + n, n, N);                 \
      } else {                                                                      \
        const int nn = v / (BK / VE), kk = (v % (BK / VE)) * VE;                    \
        const int n = n0 + nn, k = (k0) + kk;                                       \
        if (n < N) rb[r] = mma_load16(B + (long)n * sbn + k, k, kend);                 \
      }                                                                             \
    }                                                                               \
  }
#define MMA_STORE(buf)                                                                  \
  _Pragma("unroll") for (int r = 0; r < A_PER; ++r) {                               \
    const int v = tid + r * NT;                                                     \
    if (A_VECS % NT == 0 || v < A_VECS) {                                           \
      const int mm = v / (BK / VE), kw = (v % (BK / VE)) * 4;                       \
      *(__local uint4*)&As[buf][mm][kw] = ra[r];                                          \
    }                                                                               \
  }                                                                                 \
  _Pragma("unroll") for (int r = 0; r < B_PER; ++r) {                               \
    const int v = tid + r * NT;                                                     \
    if (B_VECS % NT == 0 || v < B_VECS) {                                           \
      if (B_NCONTIG) {                                                              \
        const int kk = v / (BN / VE), nn = (v % (BN / VE)) * VE;                    \
        uint w[4];                                                                  \
        vstore4(rb[r], 0, w);                                                       \
        _Pragma("unroll") for (int i = 0; i < VE; ++i)                              \
          ((__local ST*)&Bs[buf][nn + i][0])[kk] = mma_elem(w, i);                  \
      } else {                                                                      \
        const int nn = v / (BK / VE), kw = (v % (BK / VE)) * 4;                     \
        *(__local uint4*)&Bs[buf][nn][kw] = rb[r];                                        \
      }                                                                             \
    }                                                                               \
  }

  float acc[MT][NTL][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NTL; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  // One BK-slice of products from local buffer `buf`.
#if LDSM
#define MMA_COMPUTE(buf)                                                                           \
  _Pragma("unroll") for (int kw = 0; kw < BKW; kw += 8) {                                      \
    uint af[MT][4], bf[NTL + 1][2];                                                            \
    _Pragma("unroll") for (int i = 0; i < MT; ++i) {                                           \
      const int r = wm * WTM + i * 16 + (lane % 8) + ((lane / 8) & 1) * 8;                     \
      MMA_LDSM4(af[i][0], af[i][1], af[i][2], af[i][3], MMA_SMEM(&As[buf][r][kw + (lane / 16) * 4])); \
    }                                                                                          \
    _Pragma("unroll") for (int j = 0; j + 1 < NTL; j += 2) {                                   \
      const int c = wn * WTN + j * 8 + (lane % 8) + (lane / 16) * 8;                           \
      MMA_LDSM4(bf[j][0], bf[j][1], bf[j + 1][0], bf[j + 1][1],                                \
                MMA_SMEM(&Bs[buf][c][kw + ((lane / 8) & 1) * 4]));                             \
    }                                                                                          \
    if (NTL % 2) {                                                                             \
      const int c = wn * WTN + (NTL - 1) * 8 + (lane % 8);                                     \
      MMA_LDSM2(bf[NTL - 1][0], bf[NTL - 1][1], MMA_SMEM(&Bs[buf][c][kw + ((lane / 8) & 1) * 4])); \
    }                                                                                          \
    _Pragma("unroll") for (int i = 0; i < MT; ++i)                                             \
      _Pragma("unroll") for (int j = 0; j < NTL; ++j)                                          \
        mma_tile(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);       \
  }
#else
#define MMA_COMPUTE(buf)                                                                           \
  _Pragma("unroll") for (int kw = 0; kw < BKW; kw += 8) {                                      \
    uint af[MT][4], bf[NTL][2];                                                                \
    _Pragma("unroll") for (int i = 0; i < MT; ++i) {                                           \
      const int r = wm * WTM + i * 16 + g;                                                     \
      af[i][0] = As[buf][r][kw + t];                                                           \
      af[i][1] = As[buf][r + 8][kw + t];                                                       \
      af[i][2] = As[buf][r][kw + t + 4];                                                       \
      af[i][3] = As[buf][r + 8][kw + t + 4];                                                   \
    }                                                                                          \
    _Pragma("unroll") for (int j = 0; j < NTL; ++j) {                                          \
      const int c = wn * WTN + j * 8 + g;                                                      \
      bf[j][0] = Bs[buf][c][kw + t];                                                           \
      bf[j][1] = Bs[buf][c][kw + t + 4];                                                       \
    }                                                                                          \
    _Pragma("unroll") for (int i = 0; i < MT; ++i)                                             \
      _Pragma("unroll") for (int j = 0; j < NTL; ++j)                                          \
        mma_tile(acc[i][j], af[i][0], af[i][1], af[i][2], af[i][3], bf[j][0], bf[j][1]);       \
  }
#endif

#if CPASYNC
  // STAGES-deep cp.async pipeline (A and B both k-contiguous): slice kt + STAGES - 1 is in
  // flight while slice kt is multiplied; one barrier per slice.
#define MMA_ISSUE(k0, buf)                                                                         \
  _Pragma("unroll") for (int r = 0; r < A_PER; ++r) {                                          \
    const int v = tid + r * NT;                                                                \
    if (A_VECS % NT == 0 || v < A_VECS) {                                                      \
      MMA_SLOT(v, mm, kk);                                                                     \
      const int m = m0 + mm, k = (k0) + kk;                                                    \
      const int bytes = m < M ? clamp((kend - k) * ES, 0, 16) : 0;                                \
      mma_cp16(MMA_A_DST(buf, v, mm, kk), bytes ? A + (long)m * sam + k : A, bytes);           \
    }                                                                                          \
  }                                                                                            \
  _Pragma("unroll") for (int r = 0; r < B_PER; ++r) {                                          \
    const int v = tid + r * NT;                                                                \
    if (B_VECS % NT == 0 || v < B_VECS) {                                                      \
      MMA_SLOT(v, nn, kk);                                                                     \
      const int n = n0 + nn, k = (k0) + kk;                                                    \
      const int bytes = n < N ? clamp((kend - k) * ES, 0, 16) : 0;                                \
      mma_cp16(MMA_B_DST(buf, v, nn, kk), bytes ? B + (long)n * sbn + k : B, bytes);           \
    }                                                                                          \
  }
  // PREFETCH slices are in flight ahead of the one multiplied. With WGMMA and WG_WAIT = 1 the
  // previous slice's wgmma may still read its buffer while this slice's are issued, so the
  // copies go one buffer further back.
#define PREFETCH (STAGES - 1 - WG_WAIT)
#pragma unroll
  for (int s = 0; s < PREFETCH; ++s) {
    if (kbeg + s * BK < kend) { MMA_ISSUE(kbeg + s * BK, s); }
    MMA_CP_COMMIT();
  }
  for (int kt = 0; kbeg + kt * BK < kend; ++kt) {
    MMA_CP_WAIT(PREFETCH - 1);
#if WGMMA
    // This thread's landed copies (generic proxy) become visible to wgmma's reads (async proxy).
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
    // Every thread's copies of slice kt have landed, and (WG_WAIT) every warpgroup's wgmma of
    // slice kt - 1 - WG_WAIT is done, so its buffer can be refilled.
    barrier(CLK_LOCAL_MEM_FENCE);
    const int nk = kbeg + (kt + PREFETCH) * BK;
    if (nk < kend) { MMA_ISSUE(nk, (kt + PREFETCH) % STAGES); }
    MMA_CP_COMMIT();
    const int cur = kt % STAGES;
#if WGMMA
    WG_SLICE(acc, MMA_SMEM(&As[cur][0]) + (warp / 4) * 64 * KC * 16, MMA_SMEM(&Bs[cur][0]));
#else
    MMA_COMPUTE(cur);
#endif
  }
#if WGMMA && WG_WAIT
  asm volatile(PTX_TARGET_LINE("wgmma.wait_group.sync.aligned 0;") ::: "memory");
#endif
#else
  MMA_FETCH(kbeg);
  MMA_STORE(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  int cur = 0;
  for (int k0 = kbeg; k0 < kend; k0 += BK) {
    const bool more = k0 + BK < kend;
    if (more) { MMA_FETCH(k0 + BK); }
    MMA_COMPUTE(cur);
    if (more) { MMA_STORE(cur ^ 1); }
    barrier(CLK_LOCAL_MEM_FENCE);
    cur ^= 1;
  }
#endif

#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NTL; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = m0 + wm * WTM + i * 16 + g + (e / 2) * 8;
        const int n = n0 + wn * WTN + j * 8 + 2 * t + (e % 2);
#if SPLITK > 1
        if (m < M && n < N) W[(long)m * scm + n] = acc[i][j][e];
#else
        if (m < M && n < N)
          PRISM_STORE(C + (long)m * scm + n, prism_epilogue(acc[i][j][e], alpha, beta, X, x_off, sxm, sxn, m, n));
#endif
      }
}

#ifdef REDUCE
// Split-K epilogue: C(m, n) = alpha * sum_s W[s](m, n) + beta * bias, stored in the storage dtype;
// W slabs are [batch, M, N] f32, `slab` floats apart. Global size (N, M, batch).
__kernel void gemm_mma_reduce(int M, int N, int S, long slab, __global const float* W, float alpha,
                              float beta, __global GT* C, long c_off, int scm, long scb,
                              __global const GT* X, long x_off, int sxm, int sxn) {
  const int n = get_global_id(0), m = get_global_id(1);
  const long bt = get_global_id(2);
  if (n >= N || m >= M) return;
  const long w = (bt * M + m) * N + n;
  float s = 0.0f;
  for (int i = 0; i < S; ++i) s += W[i * slab + w];
  PRISM_STORE(C + c_off + bt * scb + (long)m * scm + n, prism_epilogue(s, alpha, beta, X, x_off, sxm, sxn, m, n));
}
#endif  // REDUCE
