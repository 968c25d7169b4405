// SPDX-License-Identifier: Apache-2.0
// embedding.cl: out[i, :] = weight[indices[i], :] for a contiguous [V, D] weight (rows copied
// verbatim in storage format). One work-item per output element, D fastest (coalesced rows).
// An index outside [0, V) zeroes its row and records (position, value) in `err` (first one wins
// through an atomic flag); the host reads it back and raises an error.
// Defines: RAW_T (an integer type of the weight's element size: rows are copied as bits, so
// f16 needs no half arithmetic), I_K (index kind).
__kernel void embedding(long n, long D, long V, __global const STYPE(I_K)* idx, long i_off,
                        __global const RAW_T* w, long w_off, __global RAW_T* o, long o_off,
                        __global long* err) {
  const long g = get_global_id(0);
  if (g >= n * D) return;
  const long i = g / D, j = g % D;
  const long v = LOADL(I_K, idx, i_off + i);
  if (v < 0 || v >= V) {
    o[o_off + g] = (RAW_T)0;
    if (j == 0 && atomic_cmpxchg((volatile __global int*)err, 0, 1) == 0) {
      err[1] = i;
      err[2] = v;
    }
    return;
  }
  o[o_off + g] = w[w_off + v * D + j];
}

// Variant 1 (CPUs): one work-item per index copying its whole row VEC elements at a time; variant 2
// (NT=1) adds streaming stores. On CPUs the vectors are stored through an element-aligned vector
// type (one store; PoCL's vstoreN splits them: 16 scalar stores for 16-bit rows), as in prelude.cl.
#ifdef VEC
#if PRISM_CPU
typedef PRISM_XCAT(RAW_T, VEC) __attribute__((aligned(sizeof(RAW_T)))) prism_rawv_u;
#define ROW_STORE(p, v) (*(__global prism_rawv_u*)(p) = (v))
#else
#define ROW_STORE(p, v) PRISM_XCAT(vstore, VEC)(v, 0, p)
#endif
#endif
__kernel void embedding_rows(long n, long D, long V, __global const STYPE(I_K)* idx, long i_off,
                             __global const RAW_T* w, long w_off, __global RAW_T* o, long o_off, __global long* err) {
  const long i = get_global_id(0);
  if (i >= n) return;
  const long v = LOADL(I_K, idx, i_off + i);
  __global RAW_T* orow = o + o_off + i * D;
  if (v < 0 || v >= V) {
    for (long j = 0; j < D; ++j) orow[j] = (RAW_T)0;
    if (atomic_cmpxchg((volatile __global int*)err, 0, 1) == 0) {
      err[1] = i;
      err[2] = v;
    }
    return;
  }
  __global const RAW_T* wrow = w + w_off + v * D;
  long j = 0;
#if NT
  // Variant 2: streaming stores for an aligned output row (written once, not read back here).
  typedef PRISM_XCAT(RAW_T, VEC) rawv;
  if (nt_aligned(orow)) {
    for (; j + VEC <= D; j += VEC)
      __builtin_nontemporal_store(PRISM_XCAT(vload, VEC)(0, wrow + j), (__global rawv*)(orow + j));
    nt_fence();
  }
#endif
  for (; j + VEC <= D; j += VEC) ROW_STORE(orow + j, PRISM_XCAT(vload, VEC)(0, wrow + j));
  for (; j < D; ++j) orow[j] = wrow[j];
}
