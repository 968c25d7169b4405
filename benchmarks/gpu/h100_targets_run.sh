#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried (.gpu: prism-llm,
# prism_bench_quant, prism_bench_ops, prism; see bundle_env.sh): the open GPU targets of issues
# 17, 12 and 13 in one call, most important first, each step under its own timeout and its
# output under OUTDIR as it goes (what finished comes back even if a later step runs long).
#   q  issue 17: q4_0 / q8_0 GEMV at M = 1 against the paired 64 MiB read, the 7B decode shapes,
#      bf16 activations, graph replays on a plain queue, weights streamed past the 50 MB L2
#   d  issue 17: Llama-2-7B-shaped decode, bf16 against q4_0 linear weights,
#      interleaved rounds (benchmarks/llm/quant-gpu.sh's runs)
#   m  issue 12: qwen3-0.6b decode, f32 against bf16 (graph on), interleaved rounds, then PyTorch
#      eager and its decode step in a CUDA graph on the same weights
#   a  issue 13: decode attention at 4097 keys, GQA 32/8, d = 128, f32 and bf16 (device time)
# usage: benchmarks/gpu/h100_targets_run.sh OUTDIR
# env: STEPS (qdam; the letters run in the order given) ROUNDS (2) QKEYS QTYPES QTIMEOUT (90 s a run) QMIN_TIME (0.5)
#      ATT_DTYPES (a regex: f32, bf16; default both) ATT_TIMEOUT (90 s a run)
#      QLOG_LEVEL (warn; debug logs each program build) TORCH (1: the PyTorch references after step m)
#      PRISM_BENCH_QCONFIG, when exported, reaches step q's bench: ';'-separated configs ('route' the
#      profile's) each get a row, so one call sweeps a shape (RESULTS.md, "Session 58")
set -u
out=${1:-${OUT:-h100-targets}}
mkdir -p "$out"
source benchmarks/gpu/bundle_env.sh
export PRISM_DEVICE=nvidia PRISM_TUNING_DB=/tmp/h100-targets.db
steps=${STEPS:-qdma} rounds=${ROUNDS:-2}
log=$out/summary.txt
say() { echo "$*" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  > "$out/gpu_state.txt" 2>&1
say "device: $(sed -n 2p "$out/gpu_state.txt")"
field() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }

step_q() {
  for key in ${QKEYS:-n=16384,k=4096 n=12288,k=4096 n=22016,k=4096 n=4096,k=11008}; do
    for t in ${QTYPES:-q4_0 q8_0}; do
      echo "== $key $t, from ${SECONDS}s"
      PRISM_LOG_LEVEL=${QLOG_LEVEL:-warn} PRISM_BENCH_GRAPH=1 PRISM_BENCH_QACT=bf16 PRISM_BENCH_PIPELINE=20 \
        PRISM_BENCH_LLC_BYTES=52428800 \
        PRISM_BENCH_MIN_TIME=${QMIN_TIME:-0.5} PRISM_BENCH_QKEY=m=1,$key timeout "${QTIMEOUT:-90}" \
        "$G/bin/prism_bench_quant" --benchmark_filter="$t" 2>&1
      echo "exit $? at ${SECONDS}s"
    done
  done > "$out/gemv.txt"
  say "== GEMV (x_read: weight GB/s over the paired read's)"
  grep -E "^linear_gemv" "$out/gemv.txt" | cut -c1-200 | tee -a "$log"
}

step_d() {
  say "== Llama-2-7B-shaped decode, bf16 activations, tokens/s"
  prompt=$(seq -s, 11 26)
  run7b() {  # NAME [prism-llm options...]
    local name=$1
    shift
    timeout 240 "$G/bin/prism-llm" --preset llama-2-7b --dtype bf16 --prompt-ids "$prompt" --new-tokens 64 \
      --ignore-eos --breakdown-steps 0 --repeat 2 --json "$out/7b_$name.json" "$@" > "$out/7b_$name.txt" 2>&1
    field "$out/7b_$name.json" decode_tokens_per_s
  }
  for r in $(seq "$rounds"); do
    b=$(run7b bf16) q4=$(run7b q4_0 --quantize q4_0)
    cp "$out/7b_bf16.json" "$out/7b_bf16_$r.json"; cp "$out/7b_q4_0.json" "$out/7b_q4_0_$r.json"
    say "round $r: bf16 $b, q4_0 $q4 ($(python3 -c "print(f'{$q4/$b:.3f}')" 2>/dev/null)x)," \
      "step device ms $(field "$out/7b_bf16.json" decode_step_device_ms) / $(field "$out/7b_q4_0.json" decode_step_device_ms)"
  done
}

step_a() {
  say "== decode attention, 4097 keys of a 6145-row cache, 32/8 heads, d = 128 (device time)"
  # Device time of one command (the protocol before), then graph replays of 20 calls on a plain
  # queue by wall time, samples streamed past the 50 MB L2: the route's config in both.
  PRISM_BENCH_CONFIG=route timeout ${ATT_TIMEOUT:-90} "$G/bin/prism_bench_ops" \
    --benchmark_filter="copy_ref|decode_attention/${ATT_DTYPES:-.*}/heads=32" > "$out/attention.txt" 2>&1
  PRISM_BENCH_GRAPH=1 PRISM_BENCH_LLC_BYTES=52428800 PRISM_BENCH_CONFIG=route timeout ${ATT_TIMEOUT:-90} "$G/bin/prism_bench_ops" \
    --benchmark_filter="copy_ref|decode_attention/${ATT_DTYPES:-.*}/heads=32" > "$out/attention_graph.txt" 2>&1
  grep -E "^(decode_attention|copy)" "$out/attention.txt" "$out/attention_graph.txt" | cut -c1-260 | tee -a "$log"
}
step_m() {
  say "== qwen3-0.6b decode, prompt 128, 64 new tokens, graph on, tokens/s"
  w=/tmp/h100-qwen3.safetensors
  llm() { timeout 200 "$G/bin/prism-llm" --preset qwen3-0.6b --prompt-len 128 --new-tokens 64 --graph on \
    --repeat 3 --breakdown-steps 0 "$@"; }
  llm --save-weights "$w" --dump-logits "$out/qwen3_logits.json" --json "$out/qwen3_f32_0.json" \
    > "$out/qwen3_f32_0.txt" 2>&1
  for r in $(seq "$rounds"); do
    llm --json "$out/qwen3_f32_$r.json" > "$out/qwen3_f32_$r.txt" 2>&1
    llm --dtype bf16 --json "$out/qwen3_bf16_$r.json" > "$out/qwen3_bf16_$r.txt" 2>&1
    f=$(field "$out/qwen3_f32_$r.json" decode_tokens_per_s) b=$(field "$out/qwen3_bf16_$r.json" decode_tokens_per_s)
    fp=$(field "$out/qwen3_f32_$r.json" prefill_tokens_per_s)
    say "round $r: f32 $f (prefill $fp), bf16 $b ($(python3 -c "print(f'{$b/$f:.3f}')" 2>/dev/null)x)," \
      "f32 step device ms $(field "$out/qwen3_f32_$r.json" decode_step_device_ms)," \
      "bf16 $(field "$out/qwen3_bf16_$r.json" decode_step_device_ms)"
  done
  if [ -f "$w" ] && [ "${TORCH:-1}" = 1 ]; then
    timeout 150 python3 examples/llm/torch_reference.py --weights "$w" --compare "$out/qwen3_logits.json" \
      --json "$out/torch_eager.json" > "$out/torch_eager.txt" 2>&1
    timeout 200 python3 examples/llm/torch_graph_reference.py --weights "$w" --prompt-len 128 --new-tokens 64 \
      --json "$out/torch_graph.json" > "$out/torch_graph.txt" 2>&1
    say "torch eager: $(tail -3 "$out/torch_eager.txt" | tr '\n' ' ')"
    say "torch graph: $(tail -4 "$out/torch_graph.txt" | tr '\n' ' ')"
  fi
}

for ((i = 0; i < ${#steps}; ++i)); do
  case ${steps:i:1} in
    q) step_q ;; d) step_d ;; a) step_a ;; m) step_m ;;
    *) say "unknown step '${steps:i:1}' (q, d, a, m)"; exit 2 ;;
  esac
done
say "done in ${SECONDS}s"
