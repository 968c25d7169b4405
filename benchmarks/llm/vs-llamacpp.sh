#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# prism against llama.cpp, side by side on the same machine and threads: a 135M-parameter
# Llama-shaped checkpoint (make_bench_model.py) decoded in f32 from its Hugging Face folder and
# from its F32 GGUF by prism-llm, and from the same GGUF by llama.cpp (llama-cpp-python, built by
# llamacpp-env.sh); plus the time to load the 0.5 GB safetensors file against the time to read it.
# Rounds alternate prism and llama.cpp so that both see the same machine load.
# usage: benchmarks/llm/vs-llamacpp.sh [BUILD_DIR]
# env:   WORK (~/.cache/prism/bench-models) THREADS (2) NEW_TOKENS (64) PROMPT_LEN (16) ROUNDS (3)
#        PRETUNE (seconds of `prism-llm --pretune` on the model's own shapes first, as a user does;
#        120; 0: untuned) PRISM_TUNING_DB (default: a database of the script's own in WORK)
# Each round runs prism (best of 2 generations) then llama.cpp (best of 2 after a warm-up).
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
folder=$work/llama-135m
gguf=$work/llama-135m-f32.gguf
prompt=$(seq -s, 11 $((10 + ${PROMPT_LEN:-16})))

# Loading: prism-llm's "weights" time (open, map, convert every tensor to f32 host arrays) against
# reading the same bytes with cat, both from the page cache (each preceded by a read).
cat "$folder/model.safetensors" > /dev/null
read_s=$( { /usr/bin/time -f %e cat "$folder/model.safetensors" > /dev/null; } 2>&1 )
load_s=$("$build/bin/prism-llm" --model "$folder" --prompt-ids 1 --new-tokens 1 --warmup 0 --breakdown-steps 0 \
  --max-context 64 | sed -n 's/^setup   weights \([0-9.]*\) s.*/\1/p')
size=$(stat -c %s "$folder/model.safetensors")
load_copy_s=$("$build/bin/prism-llm" --model "$folder" --no-mmap --prompt-ids 1 --new-tokens 1 --warmup 0 \
  --breakdown-steps 0 --max-context 64 | sed -n 's/^setup   weights \([0-9.]*\) s.*/\1/p')
echo "load: $size bytes, read $read_s s, prism-llm weights $load_s s (--no-mmap: $load_copy_s s)"

export PRISM_TUNING_DB=${PRISM_TUNING_DB:-$work/vs-llamacpp-tuning.db}
if [ "${PRETUNE:-120}" != 0 ]; then
  "$build/bin/prism-llm" --model "$folder" --no-mmap --pretune "${PRETUNE:-120}" --prompt-ids "$prompt" \
    --new-tokens 1 --warmup 0 --breakdown-steps 0 --max-context 512 2>&1 | grep '^prism-llm: pretune' || true
fi

field() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
for round in $(seq "$rounds"); do
  # The folder twice: used in place from the file's mapping (the default), and copied into
  # prism's memory on 2 MiB pages (--no-mmap); the GGUF once: same weights, same tokens.
  sources=("$folder" "$folder --no-mmap")
  [ "$round" = 1 ] && sources+=("$gguf")
  for src in "${sources[@]}"; do
    # shellcheck disable=SC2086  # "$folder --no-mmap" splits into the path and the flag
    OMP_NUM_THREADS=$threads "$build/bin/prism-llm" --model $src --prompt-ids "$prompt" --new-tokens "$new_tokens" \
      --ignore-eos --breakdown-steps 0 --repeat 2 --max-context 512 --json "$work/prism.json" > /dev/null
    tokens_prism=$(tr -d ' \n' < "$work/prism.json" | sed -n 's/.*"tokens":\(\[[^]]*\]\).*/\1/p')
    echo "round $round prism $(basename "$src"): decode $(field "$work/prism.json" decode_tokens_per_s) tokens/s," \
      "prefill $(field "$work/prism.json" prefill_tokens_per_s) tokens/s"
  done
  "$bench_python" "$root/benchmarks/llm/llamacpp_decode.py" "$gguf" "$threads" "$prompt" "$new_tokens" 2 \
    > "$work/llamacpp.json"
  echo "round $round llama.cpp $(basename "$gguf"): decode $(field "$work/llamacpp.json" decode_tokens_per_s)" \
    "tokens/s, prefill $(field "$work/llamacpp.json" prefill_tokens_per_s) tokens/s"
  # llama.cpp again with the PM QoS request prism-llm --poll holds (where it can be made), so
  # that both sides are also seen under the same idle-CPU setting.
  if [ -w /dev/cpu_dma_latency ]; then
    "$bench_python" -c 'import os, struct, sys, time
fd = os.open("/dev/cpu_dma_latency", os.O_WRONLY); os.write(fd, struct.pack("i", 0)); time.sleep(600)' &
    holder=$!
    "$bench_python" "$root/benchmarks/llm/llamacpp_decode.py" "$gguf" "$threads" "$prompt" "$new_tokens" 2 \
      > "$work/llamacpp-poll.json"
    kill "$holder"
    echo "round $round llama.cpp $(basename "$gguf") with idle CPUs polling: decode" \
      "$(field "$work/llamacpp-poll.json" decode_tokens_per_s) tokens/s"
  fi
done
tokens_llamacpp=$(tr -d ' \n' < "$work/llamacpp.json" | sed -n 's/.*"tokens":\(\[[^]]*\]\).*/\1/p')
echo "greedy tokens: prism $tokens_prism"
echo "               llama.cpp $tokens_llamacpp ($([ "$tokens_prism" = "$tokens_llamacpp" ] && echo identical || echo DIFFERENT))"
