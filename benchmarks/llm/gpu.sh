#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU figures of issue 6 in one command: bench.sh (untuned / tuned / host) for one preset,
# then the same model in PyTorch (f32, TF32 off, eager) on the same weights, with the logits
# and token-id comparison. Results (JSON + text) go to OUT_DIR; the weights file stays in
# WORK (it is large: 2.4 GB for qwen3-0.6b).
#
# usage, on the GPU machine from the repository root, with the bundle of prism + prism-llm:
#   source .gpu/env.sh && benchmarks/llm/gpu.sh .gpu
# env: PRESET (qwen3-0.6b) PROMPT_LEN (128) NEW_TOKENS (32) BUDGET_S (180) ROUNDS (1) REPEAT (2)
#      PRISM_DEVICE (nvidia) OUT_DIR ($OUT or ./llm-gpu-results) WORK (/tmp/prism-llm-gpu)
#      STEPS ("bench torch": either or both)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${1:-$root/.gpu}
export PRISM_DATA_DIR=${PRISM_DATA_DIR:-$root}
export PRISM_DEVICE=${PRISM_DEVICE:-nvidia}
preset=${PRESET:-qwen3-0.6b}
prompt_len=${PROMPT_LEN:-128}
new_tokens=${NEW_TOKENS:-32}
out=${OUT_DIR:-${OUT:-$root/llm-gpu-results}}
work=${WORK:-/tmp/prism-llm-gpu}
steps=${STEPS:-bench torch}
mkdir -p "$out" "$work"
llm=$bundle/bin/prism-llm

if [[ " $steps " == *" bench "* ]]; then
  WORK=$work/bench PRESET=$preset PROMPT_LEN=$prompt_len NEW_TOKENS=$new_tokens BUDGET_S=${BUDGET_S:-180} \
    ROUNDS=${ROUNDS:-1} REPEAT=${REPEAT:-2} "$root/benchmarks/llm/bench.sh" "$bundle" | tee "$out/bench_$preset.md"
  cp "$work"/bench/*.json "$out/" 2>/dev/null || true
fi

if [[ " $steps " == *" torch "* ]]; then
  db=$work/bench/tuned.db
  [ -f "$db" ] || db=$work/none.db
  echo "== prism-llm (tuned database $db) writing the weights and its logits"
  PRISM_TUNING_DB=$db "$llm" --preset "$preset" --prompt-len "$prompt_len" --new-tokens "$new_tokens" \
    --repeat "${REPEAT:-2}" --breakdown-steps 0 --save-weights "$work/weights.safetensors" \
    --dump-logits "$out/prism_logits_$preset.json" --json "$out/prism_run_$preset.json" | tee "$out/prism_$preset.txt"
  echo "== PyTorch reference on the same weights"
  python3 "$root/examples/llm/torch_reference.py" --weights "$work/weights.safetensors" \
    --compare "$out/prism_logits_$preset.json" --json "$out/torch_$preset.json" | tee "$out/torch_$preset.txt"
fi
