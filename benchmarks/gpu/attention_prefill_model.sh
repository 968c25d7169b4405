#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried: usage OUTDIR.
# qwen3-0.6b f32 at prompt 2048 with the profile's attention routes (variant 4), the old route
# (variant 1) and variant 2; then PyTorch eager on the same weights, comparing next-token logits.
set -u
out=$1; mkdir -p $out
source benchmarks/gpu/bundle_env.sh
b=$G/bin
export PRISM_DEVICE=nvidia PRISM_TUNING_DB=$out/tuning.db
for cfg in profile "variant=1,wg=128" "variant=2,bq=64,bk=32"; do
  routes=$out/routes.yaml
  if [ "$cfg" = profile ]; then : > "$routes"; else
    printf 'routes:\n  scaled_dot_product_attention:\n    - {when: "lq >= 16", backend: opencl, config: "%s"}\n' "$cfg" > "$routes"; fi
  extra=""; [ "$cfg" = profile ] && extra="--save-weights $out/w.safetensors --dump-logits $out/logits.json"
  for dt in f32 bf16; do
    [ "$dt" = bf16 ] && extra=""
    timeout 180 "$b/prism-llm" --preset qwen3-0.6b --dtype $dt --prompt-len 2048 --new-tokens 8 --repeat 3 \
      --breakdown-steps 0 --routes "$routes" --json "$out/r.json" $extra > "$out/llm.log" 2>&1
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], 'prefill', round(j['prefill_tokens_per_s'],1), 'decode', round(j['decode_tokens_per_s'],1))" \
      "$out/r.json" "$dt $cfg" 2>&1 || { echo "$dt $cfg failed"; tail -3 "$out/llm.log"; }
  done
done
timeout 300 python3 examples/llm/torch_reference.py --weights $out/w.safetensors --compare $out/logits.json --new-tokens 8 2>&1 | tail -5
rm -f $out/w.safetensors
