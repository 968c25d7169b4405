// SPDX-License-Identifier: Apache-2.0
// split_arrival.cl: the last of several work-groups that each computed a part of one result
// finishes it, with no group waiting for another (decode attention's key splits in kv_cache.cl,
// the GPU GEMM's stream-K tiles in gemm_nv.cl, argmax's row slices in reduce.cl).

// Publishes this group's partials device-wide and counts the group in at *counter; true in the
// last of the `splits` groups to arrive, which then reads every partial (volatile loads: other
// groups' stores, from L2). All items call it; *last_l (local) holds the verdict until the
// caller's next barrier.
bool last_split(__global int* counter, long splits, __local int* last_l) {
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  barrier(CLK_GLOBAL_MEM_FENCE);
  if (get_local_id(0) == 0) *last_l = atomic_inc(counter) == splits - 1;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!*last_l) return false;
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  return true;
}
