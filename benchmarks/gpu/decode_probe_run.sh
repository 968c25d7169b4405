#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried (.gpu, see bundle_env.sh;
# programs: prism, prism-llm): where a qwen3-0.6b decode token goes on NVIDIA. 1. whether Nsight
# Compute (ncu) times NVIDIA OpenCL kernels (per-kernel gpu__time_duration of a short bf16
# decode: the per-command OpenCL profiling spans overlap there); 2. decode_attention alone at the
# model's shape by dtype and config (bf16 ran 17-19 us a call in the model, f32 11-15); 3. the
# model's f32/bf16 decode and its kernel table. Usage: benchmarks/gpu/decode_probe_run.sh OUTDIR
set -u
out=$1
logs=$(mktemp -d)
source benchmarks/gpu/bundle_env.sh
b=$G/bin
export PRISM_DEVICE=nvidia PRISM_TUNING_DB=$logs/tuning.db
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
(which ncu || ls /opt/nvidia/nsight-compute/*/ncu) 2>&1 | head -2
NCU=$(which ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
timeout 150 $NCU --clock-control none --metrics gpu__time_duration.sum -c 300 \
  "$b/prism-llm" --preset qwen3-0.6b --dtype bf16 --prompt-len 16 --new-tokens 3 --graph on --repeat 1 \
  --breakdown-steps 0 > "$out/ncu.txt" 2>&1
echo "ncu exit $?"; grep -c "gpu__time_duration" "$out/ncu.txt"; head -c 3000 "$out/ncu.txt"
run() { timeout 60 "$b/prism" run "$@" --repeat 200 2>&1 | grep -E "^pipelined|error" | sed "s|^|$* : |"; }
for dt in f32 bf16; do
  for S in 256 4096; do
    for cfg in variant=3,wg=128,chunk=32 variant=3,wg=128,chunk=64 variant=3,wg=256,chunk=64 variant=3,wg=64,chunk=32 variant=2,wg=128,chunk=64; do
      run decode_attention --shape heads=16,kv_heads=8,d=128,max_seq=$S --dtype $dt --backend opencl --config $cfg
    done
  done
done | tee "$out/attn.txt"
for round in 1 2; do for dt in f32 bf16; do
  timeout 120 "$b/prism-llm" --preset qwen3-0.6b --dtype $dt --prompt-len 128 --new-tokens 64 \
    --graph on --repeat 3 --breakdown-steps 0 --json "$logs/r.json" > "$logs/llm_${dt}_$round.txt" 2>&1
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], round(j['decode_tokens_per_s'],1), round(j['prefill_tokens_per_s'],1), j.get('decode_step_commands'), j.get('launch_us_per_command'), j.get('decode_kernel_ms_per_token'))" "$logs/r.json" "round=$round $dt" || tail -3 "$logs/llm_${dt}_$round.txt"
done; done | tee "$out/model.txt"
for f in "$logs"/llm_*_1.txt; do echo "== $f"; sed -n '/decode kernels/,/^$/p' "$f"; done | tee "$out/kernels.txt"
