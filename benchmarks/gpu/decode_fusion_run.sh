#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried (.gpu, see
# bundle_env.sh): the decode step's norm fusion on NVIDIA (rms_norm_linear, linear_silu_and_mul
# with a norm weight, residual adds through addmm into the residual stream).
# 1. the op suite's gated_gemv cases and every profile's configs, and test_llm's Decoder tests;
# 2. pipelined time of the fused GEMVs per config against linear at qwen3-0.6b's decode shapes;
# 3. qwen3-0.6b decode, f32 and bf16, with and without the norm fusion, interleaved rounds, and
#    the decode kernel table; 4. PyTorch's decode step in a CUDA graph on the same weights.
# Usage: benchmarks/gpu/decode_fusion_run.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source benchmarks/gpu/bundle_env.sh
b=$G/bin
export PRISM_DEVICE=nvidia PRISM_TUNING_DB=$out/tuning.db
PRISM_OPS_ALL_VENDORS=1 timeout 240 "$b/prism_op_suite" --gtest_brief=1 \
  --gtest_filter='*gated_gemv*' > "$out/suite.txt" 2>&1
echo "suite exit $?" >> "$out/suite.txt"
timeout 120 "$b/test_llm" --gtest_brief=1 --gtest_filter='Decoder.*' >> "$out/suite.txt" 2>&1
echo "test_llm exit $?" >> "$out/suite.txt"
tail -8 "$out/suite.txt"
# 2. Op timings (pipelined), the fused ops per config and the unfused linear beside them.
run() { timeout 60 "$b/prism" run "$@" --repeat 50 2>&1 | grep -E "^pipelined" | sed "s|^|$* : |"; }
{
  for shp in m=1,n=4096,k=1024 m=1,n=151936,k=1024; do
    run linear --shape $shp
    for cfg in "" variant=0,mb=1,nb=2,wg=128 variant=0,mb=1,nb=4,wg=128 variant=0,mb=1,nb=8,wg=64 \
      variant=0,mb=1,nb=4,wg=256 variant=0,mb=1,nb=8,wg=128; do
      if [ -z "$cfg" ]; then run rms_norm_linear --shape $shp; else
        run rms_norm_linear --shape $shp --backend opencl --config $cfg; fi
    done
  done
  for dt in f32 bf16; do
    run linear --shape m=1,n=1024,k=2048 --dtype $dt
    run addmm --shape m=1,n=1024,k=2048,ta=0,tb=1 --dtype $dt
    run addmm --shape m=1,n=1024,k=3072,ta=0,tb=1 --dtype $dt
    run linear_silu_and_mul --shape m=1,n=3072,k=1024 --dtype $dt
    run rms_norm_linear --shape m=1,n=4096,k=1024 --dtype $dt
  done
} > "$out/ops.txt"
cat "$out/ops.txt"
# 3. The model, interleaved: three rounds of (without, with) the norm fusion per dtype.
for round in 1 2 3; do
  for dt in f32 bf16; do
    for fuse in attention,mlp attention,mlp,norm; do
      timeout 120 "$b/prism-llm" --preset qwen3-0.6b --dtype $dt --prompt-len 128 --new-tokens 64 \
        --graph on --fuse $fuse --repeat 3 --breakdown-steps 0 --json "$out/r.json" > "$out/llm_${dt}_${fuse}.txt" 2>&1
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], round(j['decode_tokens_per_s'],1), round(j['prefill_tokens_per_s'],1), j.get('decode_step_commands'))" \
        "$out/r.json" "round=$round $dt fuse=$fuse" 2>&1 || tail -3 "$out/llm_${dt}_${fuse}.txt"
    done
  done
done | tee "$out/model.txt"
for f in "$out"/llm_*norm.txt; do echo "== $f"; sed -n '/decode kernels/,/^$/p' "$f"; done
# 4. PyTorch's decode step in a CUDA graph on the same weights, right after.
timeout 120 "$b/prism-llm" --preset qwen3-0.6b --prompt-len 128 --new-tokens 1 --breakdown-steps 0 \
  --save-weights "$out/w.safetensors" > /dev/null 2>&1
timeout 300 python3 examples/llm/torch_graph_reference.py --weights "$out/w.safetensors" --prompt-len 128 \
  --new-tokens 64 2>&1 | tail -6 | tee "$out/torch_graph.txt"
rm -f "$out/w.safetensors"
