// SPDX-License-Identifier: Apache-2.0
// x from the lane whose index differs from the caller's in the bits of o (shfl.sync.bfly through
// inline PTX, full warp). NVIDIA only: kernels include this where kernels/ptx_forms.cpp found the
// "shfl" form (LANE_SHFL=1 in kv_cache.cl and attention_tiled.cl; always in the tensor-core ones).
inline float lane_xor(float x, int o) {
  float y;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x), "r"(o));
  return y;
}
