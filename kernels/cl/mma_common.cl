// SPDX-License-Identifier: Apache-2.0
// Inline-PTX pieces shared by prism's tensor-core kernels (gemm_mma.cl, attention_mma.cl,
// attention_tf32x3.cl; NVIDIA sm_80+ only, each form probed by kernels/ptx_forms.cpp first):
// the mma.sync tile of each form and of the storage dtype (PRISM_DTYPE 0: m16n8k8 TF32, 1:
// m16n8k16 f16, 2: m16n8k16 bf16; f32 accumulators) and the shared-window address of a local pointer.
// Needs gemm_common.cl (PRISM_DTYPE) first.

// One mma.sync of each form: c (4 f32 accumulators) += A (a0..a3) x B (b0, b1), fragments as
// the PTX ISA lays them out.
inline void mma_tile_tf32(float* c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

inline void mma_tile_f16(float* c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

inline void mma_tile_bf16(float* c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The storage dtype's form.
inline void mma_tile(float* c, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1) {
#if PRISM_DTYPE == 0
  mma_tile_tf32(c, a0, a1, a2, a3, b0, b1);
#elif PRISM_DTYPE == 1
  mma_tile_f16(c, a0, a1, a2, a3, b0, b1);
#else
  mma_tile_bf16(c, a0, a1, a2, a3, b0, b1);
#endif
}

// An inline-asm line that only a -prism-ptx-target build runs (program::build makes lines with
// this prefix, PRISM_PTX_TARGET_MARKER in prism/runtime/program.hpp, live in the retargeted
// PTX; in the driver's own build they are comments). For instructions of an arch-specific target
// such as sm_90a's wgmma.
#define PTX_TARGET_LINE(s) "// @@prism-ptx-target@@ " s "\n"

// The shared-window address of a local pointer (what PTX's .shared state space takes).
#define MMA_SMEM(p) ((uint)(size_t)(p))
