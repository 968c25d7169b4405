#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 17's GPU figures: (1) the quantized kernels against the dequantized reference on the
# GPU, every kernel family and every nvidia-profile config; (2) q8_0/q4_0/q4_1 GEMV at M = 1
# against the device's read bandwidth (prism_bench_quant: x_read, target >= 0.7); (3) decode of a
# random model of the llama-2-7b preset with its linear weights quantized at load (q4_0, q8_0;
# blocks kept on the device) against prism's bf16 decode of the same weights (target q4_0 >= 2x),
# all with bf16 activations, back to back. A 7B shape, because at the 135M size of the CPU
# comparison a GPU decode step is bound by its ~300 kernel launches, not by the weights' bytes.
# usage: PRISM_DEVICE=nvidia benchmarks/llm/quant-gpu.sh [BUILD_DIR]
# env:   PRESET (llama-2-7b) NEW_TOKENS (64) ROUNDS (2) STEPS (cgd: correctness, gemv, decode) INT8 (0, 1, only)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
export PRISM_DEVICE=${PRISM_DEVICE:-nvidia}
export PRISM_TUNING_DB=${PRISM_TUNING_DB:-$build/quant-gpu-tuning.db}
steps=${STEPS:-cgd}
if [[ $steps == *c* ]]; then
  echo "== correctness on $PRISM_DEVICE"
  PRISM_OPS_ALL_VENDORS=1 "$build/bin/prism_op_suite" --gtest_filter='quant.*:ops_gemm.linear__q*:ops_gemm.matmul__q*' \
    --gtest_brief=1
fi
if [[ $steps == *g* ]]; then
  echo "== GEMV at M = 1 vs read bandwidth"
  "$build/bin/prism_bench_quant" --benchmark_counters_tabular=true
fi
[[ $steps == *d* ]] || exit 0
echo "== decode: ${PRESET:-llama-2-7b} preset, bf16 vs q8_0 vs q4_0 linear weights"
prompt=$(seq -s, 11 26)
field() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
run() {  # run NAME [prism-llm options...]
  local name=$1
  shift
  "$build/bin/prism-llm" --preset "${PRESET:-llama-2-7b}" --dtype bf16 --prompt-ids "$prompt" \
    --new-tokens "${NEW_TOKENS:-64}" --ignore-eos --breakdown-steps 0 --repeat 2 --json "/tmp/quant-gpu-$name.json" \
    "$@" > /dev/null
  echo "$(field "/tmp/quant-gpu-$name.json" decode_tokens_per_s)"
}
# INT8=1 adds runs with int8 activations (qa=1: quantize_rows_q8 + gemm_q_rows_i8, dp4a) for the
# decode linears (M <= 8), through a routes file (config INT8_CONFIG, default the block-pair kernel);
# INT8=only runs those instead of the float ones.
int8_routes=/tmp/quant-gpu-int8.yaml
printf 'routes:\n  linear:\n    - {when: "m <= 8", backend: opencl, config: "%s"}\n' \
  "${INT8_CONFIG:-variant=3,auto=1,qa=1,qp=1}" > "$int8_routes"
ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
for round in $(seq "${ROUNDS:-2}"); do
  b=$(run bf16)
  line="round $round: decode tokens/s bf16 $b"
  if [ "${INT8:-0}" != only ]; then
    q8=$(run q8_0 --quantize q8_0)
    q4=$(run q4_0 --quantize q4_0)
    line="$line, q8_0 $q8 ($(ratio "$q8" "$b")x), q4_0 $q4 ($(ratio "$q4" "$b")x)"
  fi
  if [ "${INT8:-0}" != 0 ]; then
    q8i=$(run q8_0-int8 --quantize q8_0 --routes "$int8_routes")
    q4i=$(run q4_0-int8 --quantize q4_0 --routes "$int8_routes")
    line="$line, int8 activations: q8_0 $q8i ($(ratio "$q8i" "$b")x), q4_0 $q4i ($(ratio "$q4i" "$b")x)"
  fi
  echo "$line"
done
