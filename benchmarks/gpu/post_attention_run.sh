#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried (.gpu, see
# bundle_env.sh): post_attention (the o projection, post-attention norm, gated MLP and residual
# adds of a decode step) on NVIDIA, chained into one launch (chain=1) or three (chain=0).
# 1. the op suite's post_attention cases and every profile's configs, 20 times over (the chained
#    form's work-groups hand off through global atomics: a race shows up as a rare failure), the
#    gated_gemv suite once, and test_llm's Decoder tests;
# 2. pipelined time per config at qwen3-0.6b's decode shape, and the three unfused calls beside;
# 3. qwen3-0.6b decode, f32 and bf16, with and without the block fusion, interleaved rounds, and
#    the decode kernel table; 4. PyTorch's decode step in a CUDA graph on the same weights.
# Usage: benchmarks/gpu/post_attention_run.sh OUTDIR [ROUNDS]
set -u
out=$1
rounds=${2:-3}
mkdir -p "$out"
# Per-run logs stay out of OUTDIR (the device tool returns few files); the summaries go in it.
logs=$(mktemp -d)
source benchmarks/gpu/bundle_env.sh
b=$G/bin
export PRISM_DEVICE=nvidia PRISM_TUNING_DB=$logs/tuning.db
{
  PRISM_OPS_ALL_VENDORS=1 timeout 240 "$b/prism_op_suite" --gtest_brief=1 --gtest_repeat=20 \
    --gtest_filter='*post_attention*'
  echo "post_attention x20 exit $?"
  PRISM_OPS_ALL_VENDORS=1 timeout 240 "$b/prism_op_suite" --gtest_brief=1 --gtest_filter='*gated_gemv*'
  echo "gated_gemv exit $?"
  timeout 120 "$b/test_llm" --gtest_brief=1 --gtest_filter='Decoder.*'
  echo "test_llm exit $?"
} > "$out/suite.txt" 2>&1
grep -E "exit|FAILED|PASSED" "$out/suite.txt" | sort | uniq -c
# 2. Op timings (pipelined).
run() { timeout 60 "$b/prism" run "$@" --repeat 200 2>&1 | grep -E "^pipelined|error" | sed "s|^|$* : |"; }
{
  for dt in f32 bf16; do
    shp=m=1,h=1024,a=2048,i=3072
    run post_attention --shape $shp --dtype $dt
    for cfg in variant=0,chain=0,nb=4,wg=128 variant=0,chain=1,nb=2,wg=128 variant=0,chain=1,nb=4,wg=256 \
      variant=2,chain=0,nb=2,wg=128 variant=2,chain=1,nb=1,wg=128 variant=2,chain=1,nb=2,wg=128 \
      variant=2,chain=1,nb=4,wg=128 variant=2,chain=1,nb=2,wg=256 variant=2,chain=1,nb=1,wg=256 \
      variant=2,chain=1,nb=2,wg=64 variant=2,chain=1,nb=4,wg=64; do
      run post_attention --shape $shp --dtype $dt --backend opencl --config mb=1,$cfg
    done
    run addmm --shape m=1,n=1024,k=2048,ta=0,tb=1 --dtype $dt
    run linear_silu_and_mul --shape m=1,n=3072,k=1024 --dtype $dt
    run addmm --shape m=1,n=1024,k=3072,ta=0,tb=1 --dtype $dt
  done
} > "$out/ops.txt"
cat "$out/ops.txt"
# 3. The model, interleaved: rounds of the block fusion off, and on with each kernel form (a
# routes file per form).
forms=${FORMS:-"variant=0,chain=1,mb=1,nb=4,wg=128 variant=0,chain=1,mb=1,nb=4,wg=256 variant=2,chain=1,mb=1,nb=2,wg=128"}
for round in $(seq 1 "$rounds"); do
  for dt in f32 bf16; do
    for form in none $forms; do
      fuse=attention,mlp,norm,block
      if [ $form = none ]; then fuse=attention,mlp,norm; fi
      printf 'routes:\n  post_attention: {backend: opencl, config: "%s"}\n' "$form" > "$logs/routes.yaml"
      [ $form = none ] && rm -f "$logs/routes.yaml"
      name=${dt}_${form//[=,]/_}
      if [ -f "$logs/routes.yaml" ]; then export PRISM_ROUTES=$logs/routes.yaml; else unset PRISM_ROUTES; fi
      timeout 120 "$b/prism-llm" \
        --preset qwen3-0.6b --dtype $dt --prompt-len 128 --new-tokens 64 \
        --graph on --fuse $fuse --repeat 3 --breakdown-steps 0 --json "$logs/r.json" > "$logs/llm_$name.txt" 2>&1
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], round(j['decode_tokens_per_s'],1), round(j['prefill_tokens_per_s'],1), j.get('decode_step_commands'))" \
        "$logs/r.json" "round=$round $dt $form" 2>&1 || tail -3 "$logs/llm_$name.txt"
      rm -f "$logs/r.json"
    done
  done
done | tee "$out/model.txt"
unset PRISM_ROUTES
for f in "$logs"/llm_*.txt; do echo "== $f"; sed -n '/decode kernels/,/^$/p' "$f"; done | tee "$out/kernels.txt"
# 4. PyTorch's decode step in a CUDA graph on the same weights, right after.
timeout 120 "$b/prism-llm" --preset qwen3-0.6b --prompt-len 128 --new-tokens 1 --breakdown-steps 0 \
  --save-weights "$logs/w.safetensors" > /dev/null 2>&1
timeout 300 python3 examples/llm/torch_graph_reference.py --weights "$logs/w.safetensors" --prompt-len 128 \
  --new-tokens 64 2>&1 | tail -6 | tee "$out/torch_graph.txt"
rm -f "$logs/w.safetensors"
