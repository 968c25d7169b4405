#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job's real-format checkpoint: prism-llm --model on a Hugging Face model folder or a GGUF
# file, text in and streamed text out. PRISM_DEMO_MODEL=DIR|FILE.gguf picks the checkpoint (Llama,
# Qwen2, Qwen3 or Mistral); without it, a small random Llama is written once as a Hugging Face
# folder (config.json, model.safetensors, tokenizer.json, chat template) by prism-llm --save-model.
# PRISM_DEMO_PROMPT and PRISM_DEMO_ARGS (extra prism-llm arguments) apply. Expects a built tree.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PRISM_BUILD_DIR:-$root/build}
llm=$build/bin/prism-llm
read -r -a extra <<< "${PRISM_DEMO_ARGS:-}"
model=${PRISM_DEMO_MODEL:-}
if [ -z "$model" ]; then
  model=$build/demo-model
  if [ ! -f "$model/config.json" ]; then
    echo "== writing a small random Llama as a Hugging Face model folder: $model"
    "$llm" --preset demo --seed 7 --save-model "$model" --new-tokens 1 --warmup 0 --breakdown-steps 0 > /dev/null
  fi
fi
prompt=${PRISM_DEMO_PROMPT:-The quick brown fox}
echo
echo "== prism-llm --model $model --prompt \"$prompt\" (greedy, streamed, stops at EOS)"
"$llm" --model "$model" --prompt "$prompt" --new-tokens 32 --breakdown-steps 0 "${extra[@]}"
echo
echo "== the same prompt in the model's chat format, sampled (--chat --temperature 0.8 --top-p 0.9 --seed 1)"
"$llm" --model "$model" --chat --prompt "$prompt" --temperature 0.8 --top-p 0.9 --seed 1 --new-tokens 32 \
  --breakdown-steps 0 "${extra[@]}" | sed -n '1,/^output/p'
