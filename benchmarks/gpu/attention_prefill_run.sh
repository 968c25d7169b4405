#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried (.gpu, see
# bundle_env.sh): scaled_dot_product_attention's prefill variants on NVIDIA. 1. the op suite's
# attention cases and every profile's configs, and the tiled variant's own tests; 2. device time
# per config at sequence 2048, d = 128, causal (prism_bench_ops, OpenCL profiling) and
# PyTorch's scaled_dot_product_attention on the same shapes; 3. qwen3-0.6b prefill with each
# config routed. Usage: benchmarks/gpu/attention_prefill_run.sh OUTDIR
# Env: AP_CONFIGS (configs to time), AP_MODEL_CONFIGS (configs routed in the model).
set -u
out=$1
mkdir -p "$out"
source benchmarks/gpu/bundle_env.sh
b=$G/bin
export PRISM_DEVICE=nvidia PRISM_TUNING_DB=$out/tuning.db
PRISM_OPS_ALL_VENDORS=1 timeout 240 "$b/prism_op_suite" --gtest_brief=1 \
  --gtest_filter='*_attention.scaled_dot_product_attention*:attention_variants.*' > "$out/suite.txt" 2>&1
echo "suite exit $?" >> "$out/suite.txt"
tail -4 "$out/suite.txt"
configs=${AP_CONFIGS:-"default variant=2,bq=64,bk=32 variant=3,bq=64,bk=64 variant=3,bq=64,bk=32 variant=3,bq=64,bk=32,stages=2 variant=3,bq=128,bk=32,stages=2 variant=3,bq=128,bk=64"}
# AP_ROUNDS (default 1) alternates the prism configs and PyTorch that many times.
for round in $(seq ${AP_ROUNDS:-1}); do
for cfg in $configs; do
  echo "== $cfg"
  if [ "$cfg" = default ]; then unset PRISM_BENCH_CONFIG; else export PRISM_BENCH_CONFIG=$cfg; fi
  filter=scaled_dot_product_attention
  [ "${cfg#variant=3}" != "$cfg" ] && filter='scaled_dot_product_attention/(bf16|f16)'  # 16-bit only
  [ "${cfg#variant=4}" != "$cfg" ] && filter='scaled_dot_product_attention/f32'  # f32 only
  PRISM_BENCH_VENDOR=nvidia timeout 120 "$b/prism_bench_ops" --benchmark_filter="$filter" \
    --benchmark_min_time=0.2s 2>&1 | grep -E "^scaled_dot"
done >> "$out/bench.txt"
unset PRISM_BENCH_CONFIG
timeout 120 python3 benchmarks/gpu/torch_attention_prefill.py >> "$out/torch.txt" 2>&1
done
cat "$out/bench.txt" "$out/torch.txt"
models=${AP_MODEL_CONFIGS:-"profile variant=2,bq=64,bk=32 variant=3,bq=64,bk=64"}
for dt in f32 bf16; do
  for cfg in $models; do
    [ "$dt" = f32 ] && [ "${cfg#variant=3}" != "$cfg" ] && continue  # 16-bit only
    [ "$dt" = bf16 ] && [ "${cfg#variant=4}" != "$cfg" ] && continue  # f32 only
    routes=$out/routes.yaml
    if [ "$cfg" = profile ]; then : > "$routes"; else
      # A 16-bit-only config (variant 3) routes the 16-bit calls, an f32-only one (variant 4) the
      # f32 calls; the other dtype keeps the profile's route.
      printf 'routes:\n  scaled_dot_product_attention:\n    - {when: "%s", backend: opencl, config: "%s"}\n' \
        "$( [ "${cfg#variant=3}" != "$cfg" ] && echo 'esize == 2 && lq >= 16' || { [ "${cfg#variant=4}" != "$cfg" ] && echo 'esize == 4 && lq >= 16' || echo 'lq >= 16'; })" "$cfg" > "$routes"; fi
    timeout 180 "$b/prism-llm" --preset qwen3-0.6b --dtype $dt --prompt-len 2048 --new-tokens 4 \
      --repeat 3 --breakdown-steps 0 --routes "$routes" --json "$out/r.json" > "$out/llm.log" 2>&1
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], 'prefill', j['prefill_tokens_per_s'], 'decode', j['decode_tokens_per_s'])" \
      "$out/r.json" "$dt prompt=2048 $cfg" 2>&1 || { echo "$dt $cfg failed"; tail -3 "$out/llm.log"; }
  done
done | tee "$out/model.txt"
