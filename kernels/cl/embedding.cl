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
