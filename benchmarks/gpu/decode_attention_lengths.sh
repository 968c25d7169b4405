#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried (.gpu, see
# bundle_env.sh): decode_attention's device time at visible lengths from 129 to 16385 keys
# (32 query / 8 kv heads, d = 128; the sample fills 2/3 of max_seq, so max_seq = 3 (keys - 1) / 2),
# for each config, to split a call's fixed cost from its cost per key; then an empty launch's
# device time (prism_device_limits_probe), the floor under the fixed cost.
# Usage: benchmarks/gpu/decode_attention_lengths.sh [DTYPE:CONFIG ...]
# (default: the nvidia routes, bf16 and f32 caches of 4096 rows or more).
set -u
source benchmarks/gpu/bundle_env.sh
b=$G/bin
export PRISM_DEVICE=${PRISM_DEVICE:-nvidia} PRISM_BENCH_VENDOR=nvidia
export PRISM_TUNING_DB=${PRISM_TUNING_DB:-$(mktemp -d)/tuning.db}
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=("bf16:variant=3,wg=128,chunk=32,hr=1,sp=32" "f32:variant=3,wg=256,chunk=128")
seqs="192 768 1536 3072 6145 12288 24576"
for run in "${runs[@]}"; do
  dt=${run%%:*} cfg=${run#*:}
  cases=""
  for s in $seqs; do cases="$cases;decode_attention/$dt/heads=32,kv_heads=8,d=128,max_seq=$s"; done
  echo "== $dt $cfg (device ns a call)"
  PRISM_BENCH_CASES=${cases#;} PRISM_BENCH_CONFIG=$cfg timeout 120 "$b/prism_bench_ops" \
    --benchmark_filter="decode_attention/$dt/heads=32,kv_heads=8,d=128,max_seq=(${seqs// /|})/" 2>&1 |
    grep -E "^decode_attention|rror" | awk '{print $1, $2}'
done
timeout 60 "$b/prism_device_limits_probe" 32 47 48 64 227
