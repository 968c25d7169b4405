#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# prism against llama.cpp on quantized weights (issue 17), side by side on the same machine and
# threads: the 135M-parameter Llama-shaped checkpoint of make_bench_model.py, quantized from its
# F32 GGUF by llama.cpp's own quantizer (llama-quantize's rules: the tied head/embedding in Q8_0
# where rows are not 256-element super-blocks), then decoded from the same file by prism-llm
# (blocks kept on the device) and by llama.cpp (llama-cpp-python, llamacpp-env.sh). Rounds run
# prism then llama.cpp back to back and print each round's decode ratio: on a shared machine
# compare ratios, not absolute tokens/s.
# usage: benchmarks/llm/vs-llamacpp-quant.sh [BUILD_DIR]
# env:   WORK (~/.cache/prism/bench-models) THREADS (2) NEW_TOKENS (64) PROMPT_LEN (16) ROUNDS (3)
#        QUANTS ("Q8_0 Q4_0"; Q4_1 also works) PRISM_DEVICE (e.g. nvidia for the H100 figures)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
work=${WORK:-$HOME/.cache/prism/bench-models}
threads=${THREADS:-2}
new_tokens=${NEW_TOKENS:-64}
rounds=${ROUNDS:-3}
mkdir -p "$work"
test_python=$(bash "$root/scripts/python-env.sh")
bench_python=$(bash "$root/benchmarks/llm/llamacpp-env.sh")
"$test_python" "$root/benchmarks/llm/make_bench_model.py" "$work"
f32=$work/llama-135m-f32.gguf
prompt=$(seq -s, 11 $((10 + ${PROMPT_LEN:-16})))
field() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
for quant in ${QUANTS:-Q8_0 Q4_0}; do
  gguf=$work/llama-135m-$quant.gguf
  [ -f "$gguf" ] || "$bench_python" "$root/tests/llm/hf/llamacpp_tool.py" quantize "$f32" "$gguf" "$quant" 2> /dev/null
  for round in $(seq "$rounds"); do
    OMP_NUM_THREADS=$threads "$build/bin/prism-llm" --model "$gguf" --prompt-ids "$prompt" --new-tokens "$new_tokens" \
      --ignore-eos --breakdown-steps 0 --repeat 2 --max-context 512 --json "$work/prism-$quant.json" > /dev/null
    "$bench_python" "$root/benchmarks/llm/llamacpp_decode.py" "$gguf" "$threads" "$prompt" "$new_tokens" 2 \
      > "$work/llamacpp-$quant.json"
    p=$(field "$work/prism-$quant.json" decode_tokens_per_s)
    l=$(field "$work/llamacpp-$quant.json" decode_tokens_per_s)
    echo "$quant round $round: decode prism $p tokens/s, llama.cpp $l tokens/s, ratio $(python3 -c "print(f'{$p / $l:.2f}')")" \
      "(prefill prism $(field "$work/prism-$quant.json" prefill_tokens_per_s), llama.cpp $(field "$work/llamacpp-$quant.json" prefill_tokens_per_s))"
  done
done
