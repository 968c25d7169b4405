#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issues 17 and 12 on the GPU machine in one call, from the repository root with the bundle
# (.gpu: prism-llm, prism, prism_op_suite, prism_bench_quant, data/vendors) carried:
#   q  quantized weights (benchmarks/llm/quant-gpu.sh): correctness, GEMV vs read bandwidth;
#   s  GEMV configs of the quantized kernels (prism_bench_quant, PRISM_BENCH_QCONFIG);
#   d  decode of the llama-2-7b preset, bf16 vs q8_0 vs q4_0 linear weights (quant-gpu.sh step d);
#   p  `prism-llm --pretune` of the qwen3-0.6b preset from an empty database, with each shape's
#      time split (reference, candidate builds, measuring), then the tuned run.
# usage: benchmarks/llm/gpu_quant.sh   env: STEPS (default qdp), BUDGET (pretune s, 170)
set -u
source benchmarks/gpu/bundle_env.sh
export PRISM_DEVICE=${PRISM_DEVICE:-nvidia}
steps=${STEPS:-qdp}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
case $steps in *q*)
  PRISM_TUNING_DB=/tmp/prism-quant.db STEPS=c timeout 240 bash benchmarks/llm/quant-gpu.sh "$G" 2>&1 | tail -40;; esac
case $steps in *s*)
  for cfg in "variant=3,auto=1" "variant=4,mb=1,nb=1,warps=8" "variant=4,mb=1,nb=4,warps=4" "variant=4,mb=1,nb=8,warps=4" \
    "variant=4,mb=1,nb=4,warps=8" "variant=4,mb=1,nb=2,warps=8"; do
    echo "config $cfg"
    PRISM_BENCH_QCONFIG=$cfg timeout 60 "$G/bin/prism_bench_quant" --benchmark_filter='q8_0|q4_0' \
      --benchmark_min_time=0.3s --benchmark_counters_tabular=true 2>&1 | grep "^linear" | awk '{print $1, $2, $3, $6, $7, $8}'
  done;; esac
case $steps in *d*)
  PRISM_TUNING_DB=/tmp/prism-quant.db STEPS=d ROUNDS=${ROUNDS:-1} timeout 420 bash benchmarks/llm/quant-gpu.sh "$G" 2>&1 | tail -8;; esac
case $steps in *p*)
  export PRISM_TUNING_DB=/tmp/prism-pretune.db
  rm -f "$PRISM_TUNING_DB"
  /usr/bin/time -f "pretune command wall %e s" timeout ${PRETUNE_TIMEOUT:-420} "$G/bin/prism-llm" --preset qwen3-0.6b --prompt-len 128 \
    --new-tokens 32 --breakdown-steps 0 --pretune "${BUDGET:-170}" --graph on --repeat 3 > /tmp/p0.txt 2> /tmp/p0.err
  grep -E "^pretune: \[|payoff order|budget|prism-llm: pretune" /tmp/p0.err | cut -c1-330
  tail -3 /tmp/p0.err
  grep -E "^(prefill|decode|graph)" /tmp/p0.txt;; esac
true
