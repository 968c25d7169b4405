#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine: the whole op suite on one device, split into SHARDS gtest shards run at
# once (PoCL: each shard gets cores/SHARDS worker threads, so its kernel compiles, which are
# single-threaded, run side by side), each with a tuning database of its own. Writes
# OUT/ops_<device>_<shard>.txt and prints one summary line per shard.
# usage: benchmarks/gpu/op_suite_sharded.sh DEVICE OUT [SHARDS (4)] [TIMEOUT_S (540)]
set -u
source benchmarks/gpu/bundle_env.sh
device=$1 out=$2 shards=${3:-4} limit=${4:-540}
threads=$(($(nproc) / shards))
for i in $(seq 0 $((shards - 1))); do
  (GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i POCL_MAX_PTHREAD_COUNT=$threads PRISM_DEVICE=$device \
    PRISM_TUNING_DB=$out/ops-$i.db timeout "$limit" "$G/bin/prism_op_suite" --gtest_brief=1 \
    > "$out/ops_${device}_$i.txt" 2>&1; echo "exit $?" >> "$out/ops_${device}_$i.txt") &
done
wait
for i in $(seq 0 $((shards - 1))); do
  f=$out/ops_${device}_$i.txt
  echo "shard $i: $(grep -E '^\[  PASSED  \]|FAILED TEST|^exit' "$f" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' "$f" | head -20
done
