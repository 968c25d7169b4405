#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 17's GPU figures (written for the H100 the lead runs; nothing here was measured by the
# quant helper): (1) the quantized kernels against the dequantized reference on the GPU, every
# kernel family and every nvidia-profile config; (2) q8_0/q4_0/q4_1 GEMV at M = 1 against the
# device's read bandwidth (prism_bench_quant: x_read, target >= 0.7); (3) decode of the 135M
# checkpoint from its Q4_0 GGUF (blocks kept on the device) against prism's bf16 decode of the
# same model (target >= 2x), both with bf16 activations, rounds back to back.
# usage: PRISM_DEVICE=nvidia benchmarks/llm/quant-gpu.sh [BUILD_DIR]
# env:   WORK (~/.cache/prism/bench-models) NEW_TOKENS (128) ROUNDS (3)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
work=${WORK:-$HOME/.cache/prism/bench-models}
export PRISM_DEVICE=${PRISM_DEVICE:-nvidia}
export PRISM_TUNING_DB=${PRISM_TUNING_DB:-$build/quant-gpu-tuning.db}
echo "== correctness on $PRISM_DEVICE"
PRISM_OPS_ALL_VENDORS=1 "$build/bin/prism_op_suite" --gtest_filter='quant.*:ops_gemm.linear__q*:ops_gemm.matmul__q*' \
  --gtest_brief=1
echo "== GEMV at M = 1 vs read bandwidth"
"$build/bin/prism_bench_quant" --benchmark_counters_tabular=true
echo "== decode: Q4_0 GGUF vs bf16"
test_python=$(bash "$root/scripts/python-env.sh")
"$test_python" "$root/benchmarks/llm/make_bench_model.py" "$work"
q4=$work/llama-135m-Q4_0.gguf
if [ ! -f "$q4" ]; then
  bench_python=$(bash "$root/benchmarks/llm/llamacpp-env.sh")
  "$bench_python" "$root/tests/llm/hf/llamacpp_tool.py" quantize "$work/llama-135m-f32.gguf" "$q4" Q4_0
fi
prompt=$(seq -s, 11 26)
field() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
for round in $(seq "${ROUNDS:-3}"); do
  "$build/bin/prism-llm" --model "$work/llama-135m" --dtype bf16 --prompt-ids "$prompt" \
    --new-tokens "${NEW_TOKENS:-128}" --ignore-eos --breakdown-steps 0 --repeat 3 --max-context 512 \
    --json "$work/gpu-bf16.json" > /dev/null
  "$build/bin/prism-llm" --model "$q4" --dtype bf16 --prompt-ids "$prompt" --new-tokens "${NEW_TOKENS:-128}" \
    --ignore-eos --breakdown-steps 0 --repeat 3 --max-context 512 --json "$work/gpu-q4_0.json" > /dev/null
  b=$(field "$work/gpu-bf16.json" decode_tokens_per_s)
  q=$(field "$work/gpu-q4_0.json" decode_tokens_per_s)
  echo "round $round: decode bf16 $b tokens/s, q4_0 $q tokens/s, ratio $(python3 -c "print(f'{$q / $b:.2f}')")"
done
