#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried (.gpu, see
# bundle_env.sh): decode_attention's variants on NVIDIA. 1. the op suite's decode_attention
# cases and every profile's configs; 2. device time per variant (prism_bench_ops, OpenCL
# profiling) and PyTorch's scaled_dot_product_attention on the same shapes; 3. qwen3-0.6b decode
# with each variant routed. Usage: benchmarks/gpu/decode_attention_run.sh OUTDIR
set -u
out=$1
mkdir -p "$out"
source benchmarks/gpu/bundle_env.sh
b=$G/bin
export PRISM_DEVICE=nvidia PRISM_TUNING_DB=$out/tuning.db
PRISM_OPS_ALL_VENDORS=1 timeout 240 "$b/prism_op_suite" --gtest_brief=1 \
  --gtest_filter='configs_kv_cache.decode_attention*:kv_cache_variants.*:ops_kv_cache.decode_attention*' \
  > "$out/suite.txt" 2>&1
echo "suite exit $?" >> "$out/suite.txt"
tail -4 "$out/suite.txt"
configs=${DA_CONFIGS:-"default variant=2,wg=128,chunk=128 variant=3,wg=128,chunk=32 variant=3,wg=128,chunk=64 variant=3,wg=128,chunk=128 variant=3,wg=64,chunk=64 variant=3,wg=128,chunk=256"}
for cfg in $configs; do
  echo "== $cfg"
  if [ "$cfg" = default ]; then unset PRISM_BENCH_CONFIG; else export PRISM_BENCH_CONFIG=$cfg; fi
  PRISM_BENCH_VENDOR=nvidia timeout 60 "$b/prism_bench_ops" --benchmark_filter='decode_attention' 2>&1 |
    grep -E "^decode_attention"
done > "$out/bench.txt"
unset PRISM_BENCH_CONFIG
cat "$out/bench.txt"
timeout 60 python3 benchmarks/gpu/torch_decode_attention.py > "$out/torch.txt" 2>&1
cat "$out/torch.txt"
# The model: each routed config, f32 and bf16, a short and a long prompt.
models=${DA_MODEL_CONFIGS:-"profile variant=3,wg=128,chunk=64 variant=3,wg=128,chunk=128"}
for dt in f32 bf16; do
  for len in 128 1024; do
    for cfg in $models; do
      routes=$out/routes.yaml
      if [ "$cfg" = profile ]; then : > "$routes"; else
        printf 'routes:\n  decode_attention: {backend: opencl, config: "%s"}\n' "$cfg" > "$routes"; fi
      for fuse in attention,mlp mlp; do
        [ "$cfg" != profile ] && [ "$fuse" = mlp ] && continue  # variant 3 is the fused op's
        r=$(timeout 120 "$b/prism-llm" --preset qwen3-0.6b --dtype $dt --prompt-len $len --new-tokens 64 \
          --graph on --fuse $fuse --repeat 3 --breakdown-steps 0 --routes "$routes" --json "$out/r.json" 2>&1 |
          tail -1)
        python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], j['decode_tokens_per_s'], j['prefill_tokens_per_s'])" \
          "$out/r.json" "$dt prompt=$len fuse=$fuse $cfg" 2>&1 || echo "$dt $len $fuse $cfg failed: $r"
      done
    done
  done
done | tee "$out/model.txt"
# PyTorch's decode step in a CUDA graph on the same weights, right after (DA_TORCH_GRAPH=1).
if [ "${DA_TORCH_GRAPH:-0}" = 1 ]; then
  timeout 120 "$b/prism-llm" --preset qwen3-0.6b --prompt-len 128 --new-tokens 1 --breakdown-steps 0 \
    --save-weights "$out/w.safetensors" > /dev/null 2>&1
  timeout 300 python3 examples/llm/torch_graph_reference.py --weights "$out/w.safetensors" --prompt-len 128 \
    --new-tokens 64 2>&1 | tail -6 | tee "$out/torch_graph.txt"
  rm -f "$out/w.safetensors"
fi
