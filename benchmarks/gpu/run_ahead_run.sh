#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried (.gpu, see bundle_env.sh;
# programs: prism-llm, test_llm, prism_runtime_tests): greedy decode one step ahead of the host
# (prism-llm --run-ahead) on NVIDIA. 1. the run-ahead and graph tests there; 2. qwen3-0.6b decode,
# run-ahead on and off interleaved, f32, bf16 and q4_0 weights (bf16 activations); 3. PyTorch's
# decode step in a CUDA graph on the same weights. Usage: benchmarks/gpu/run_ahead_run.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
logs=$(mktemp -d)
source benchmarks/gpu/bundle_env.sh
b=$G/bin
export PRISM_DEVICE=nvidia PRISM_TUNING_DB=$logs/tuning.db
{
  timeout 120 "$b/test_llm" --gtest_brief=1 --gtest_filter='Decoder.*'
  echo "test_llm exit $?"
  timeout 120 "$b/prism_runtime_tests" --gtest_brief=1 --gtest_filter='graph*:Buffers.NonBlocking*'
  echo "runtime exit $?"
} > "$out/tests.txt" 2>&1
grep -E "exit|FAILED" "$out/tests.txt"
# run_ahead.sh runs $build/bin/prism-llm: point it at the bundle.
mkdir -p "$logs/build" && ln -s "$b" "$logs/build/bin"
for dt in f32 bf16; do
  PRESETS=qwen3-0.6b DTYPE=$dt ROUNDS=3 NEW_TOKENS=64 PROMPT_LEN=128 timeout 300 \
    bash benchmarks/llm/run_ahead.sh "$logs/build"
done | tee "$out/model.txt"
PRESETS=qwen3-0.6b DTYPE=bf16 ROUNDS=3 NEW_TOKENS=64 PROMPT_LEN=128 EXTRA="--quantize q4_0" timeout 300 \
  bash benchmarks/llm/run_ahead.sh "$logs/build" | sed 's/^/q4_0 weights: /' | tee -a "$out/model.txt"
timeout 120 "$b/prism-llm" --preset qwen3-0.6b --prompt-len 128 --new-tokens 1 --breakdown-steps 0 \
  --save-weights "$logs/w.safetensors" > /dev/null 2>&1
timeout 300 python3 examples/llm/torch_graph_reference.py --weights "$logs/w.safetensors" --prompt-len 128 \
  --new-tokens 64 2>&1 | tail -6 | tee "$out/torch_graph.txt"
rm -rf "$logs"
