#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 12's decode figures on the GPU machine in one call, back to back on one device: prism-llm
# (graph off, graph on, f32 and bf16) and PyTorch on the same weights (eager, and the decode step
# in a CUDA graph with a static KV cache), plus the per-step breakdown of one decode token.
# usage, from the repository root with the bundle (.gpu: prism-llm, prism, prism_op_suite and
# data/vendors) carried:  benchmarks/llm/gpu_graph.sh OUTDIR
# env: PRESET (qwen3-0.6b) PROMPT_LEN (128) NEW_TOKENS (32) STEPS (letters: e eager, g graph,
# b bf16, p profile breakdown, t torch, o op suite; default egbpto)
set -u
out=${1:-${OUT:-llm-gpu-graph}}
mkdir -p "$out"
source benchmarks/gpu/bundle_env.sh
export PRISM_TUNING_DB=${PRISM_TUNING_DB:-/tmp/prism-graph.db} PRISM_DEVICE=${PRISM_DEVICE:-nvidia}
preset=${PRESET:-qwen3-0.6b} pl=${PROMPT_LEN:-128} nt=${NEW_TOKENS:-32} steps=${STEPS:-egbpto}
w=/tmp/prism-graph-weights.safetensors
llm() { timeout 240 "$G/bin/prism-llm" --preset "$preset" --prompt-len "$pl" --new-tokens "$nt" "$@"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$out/gpu_state.txt" 2>&1
case $steps in *e*) llm --graph off --repeat 3 --breakdown-steps 0 --save-weights "$w" --dump-logits "$out/prism_logits.json" --json "$out/prism_eager.json" > "$out/prism_eager.txt" 2>&1;; esac
case $steps in *g*) llm --graph on --repeat 3 --breakdown-steps 0 --json "$out/prism_graph.json" > "$out/prism_graph.txt" 2>&1
                    llm --graph auto --repeat 3 --breakdown-steps 0 --json "$out/prism_auto.json" > "$out/prism_auto.txt" 2>&1;; esac
case $steps in *b*) llm --dtype bf16 --graph on --repeat 3 --breakdown-steps 0 --json "$out/prism_bf16_graph.json" > "$out/prism_bf16_graph.txt" 2>&1;; esac
case $steps in *p*) PRISM_LOG_DISPATCH=profile PRISM_LOG_DISPATCH_FILE=/tmp/prism-graph-profile.log llm --graph off --repeat 1 --breakdown-steps 4 > "$out/prism_breakdown.txt" 2>&1;; esac
case $steps in *t*) [ -f "$w" ] && {
  timeout 200 python3 examples/llm/torch_reference.py --weights "$w" --compare "$out/prism_logits.json" --json "$out/torch_eager.json" > "$out/torch_eager.txt" 2>&1
  timeout 200 python3 examples/llm/torch_graph_reference.py --weights "$w" --prompt-len "$pl" --new-tokens "$nt" --json "$out/torch_graph.json" > "$out/torch_graph.txt" 2>&1; };; esac
case $steps in *o*) timeout 120 "$G/bin/prism_op_suite" --gtest_brief=1 --gtest_filter="${OPS_FILTER:-*kv_cache*}" > "$out/ops.txt" 2>&1; echo "exit $?" >> "$out/ops.txt";; esac
true
