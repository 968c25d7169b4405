#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 12 on the GPU machine in one call (the model against PyTorch around a pretune): the 16-bit small-M GEMM's correctness (NvGemm tests,
# op suite), prism-llm decode f32/bf16 with the graph, then prefill before and after a pretune of
# the model's own recorded linear shapes (the pretune table is default vs best per shape).
# usage, from the repository root with the bundle (.gpu: prism-llm, prism, prism_op_suite,
# prism_gemm_nvidia_test, data/vendors) carried:  benchmarks/llm/gpu_pretune.sh
# env: STEPS (letters: c checks, d decode f32+bf16, r record+pretune+after, p prism-llm --pretune
# then prism and PyTorch (eager, CUDA graph f32/bf16) back to back; default cdr),
# BUDGET (pretune seconds, 150), PRESET (qwen3-0.6b)
set -u
source benchmarks/gpu/bundle_env.sh
export PRISM_TUNING_DB=${PRISM_TUNING_DB:-/tmp/prism-pretune.db} PRISM_DEVICE=${PRISM_DEVICE:-nvidia}
preset=${PRESET:-qwen3-0.6b} steps=${STEPS:-cdr}
llm() { timeout 200 "$G/bin/prism-llm" --preset "$preset" --prompt-len 128 --new-tokens 32 --breakdown-steps 0 "$@"; }
summary() { grep -E "^(prefill|decode|graph)" "$1" | tr '\n' ' '; echo; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
case $steps in *c*)
  timeout 120 "$G/bin/prism_gemm_nvidia_test" --gtest_brief=1 2>&1 | tail -5
  timeout 120 "$G/bin/prism_op_suite" --gtest_brief=1 --gtest_filter='*gated*' 2>&1 | tail -3;; esac
case $steps in *d*)
  for dt in f32 bf16; do
    llm --dtype $dt --graph on --repeat 3 > /tmp/d_$dt.txt 2>&1; echo "decode $dt: $(summary /tmp/d_$dt.txt)"
  done
  llm --dtype bf16 --graph on --fuse mlp --repeat 3 > /tmp/d_bf16m.txt 2>&1; echo "decode bf16 --fuse mlp: $(summary /tmp/d_bf16m.txt)";; esac
case $steps in *r*)
  rm -f "$PRISM_TUNING_DB" /tmp/shapes.yaml
  PRISM_RECORD_UNTUNED_EXACT=1 PRISM_RECORD_UNTUNED=/tmp/shapes.yaml llm --graph on --repeat 2 > /tmp/r0.txt 2>&1
  echo "before pretune: $(summary /tmp/r0.txt)"
  grep -c "op:" /tmp/shapes.yaml; grep "op: linear" /tmp/shapes.yaml
  timeout ${BUDGET_TIMEOUT:-260} "$G/bin/prism" pretune --shapes /tmp/shapes.yaml --ops linear --max-candidates 40 \
    --budget-s "${BUDGET:-150}" --progress lines > /tmp/pt.txt 2>/tmp/pt.err; echo "pretune exit $?"
  cat /tmp/pt.txt | tail -40
  llm --graph on --repeat 3 > /tmp/r1.txt 2>&1; echo "after pretune: $(summary /tmp/r1.txt)";; esac
case $steps in *p*)
  rm -f "$PRISM_TUNING_DB"; w=/tmp/pretune-weights.safetensors
  timeout 400 "$G/bin/prism-llm" --preset "$preset" --prompt-len 128 --new-tokens 32 --breakdown-steps 0 \
    --pretune "${BUDGET:-170}" --graph on --repeat 3 --save-weights $w --dump-logits /tmp/p_logits.json > /tmp/p0.txt 2>&1
  grep -iE "pretune" /tmp/p0.txt | tail -3; echo "prism f32 after --pretune: $(summary /tmp/p0.txt)"
  llm --graph on --repeat 3 > /tmp/p1.txt 2>&1; echo "prism f32 again: $(summary /tmp/p1.txt)"
  llm --dtype bf16 --graph on --fuse mlp --repeat 3 > /tmp/p2.txt 2>&1; echo "prism bf16 --fuse mlp: $(summary /tmp/p2.txt)"
  timeout 200 python3 examples/llm/torch_reference.py --weights $w --compare /tmp/p_logits.json > /tmp/te.txt 2>&1
  echo "torch eager:"; grep -iE "prefill|decode|max|logit" /tmp/te.txt | head -6
  timeout 200 python3 examples/llm/torch_graph_reference.py --weights $w --prompt-len 128 --new-tokens 32 > /tmp/tg.txt 2>&1
  echo "torch graph:"; tail -6 /tmp/tg.txt;; esac
true
