#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the repository root with the bundle carried (.gpu, see bundle_env.sh;
# programs: prism, prism-llm): one kernel file against another version of it, interleaved on one
# device with the same host code. A is the build's embedded kernels/cl/<name>; B is FILE, served
# as the nvidia profile's kernel override (vendors/nvidia/kernels/<name>, docs/dispatch.md) from a
# copy of the bundle's data folder. 1. each line of OPS through `prism run` (pipelined time; the
# check against the host reference runs too); 2. qwen3-0.6b decode in each of DTYPES, ROUNDS
# rounds of A then B, with the decode kernel table of the first round.
# Usage: benchmarks/gpu/kernel_ab_run.sh OUTDIR FILE.cl
# env:   OPS (newline-separated `prism run` arguments), ROUNDS (2), DTYPES ("f32 bf16"),
#        PROMPT_LEN (128), NEW_TOKENS (64)
set -u
out=$1
file=$2
mkdir -p "$out"
source benchmarks/gpu/bundle_env.sh
b=$G/bin
tmp=$(mktemp -d)
export PRISM_DEVICE=nvidia PRISM_TUNING_DB=$tmp/tuning.db
name=$(basename "$file")
cp -r "$G/data" "$tmp/data_b"
mkdir -p "$tmp/data_b/vendors/nvidia/kernels"
cp "$file" "$tmp/data_b/vendors/nvidia/kernels/$name"
side() { [ "$1" = A ] && echo "$G/data" || echo "$tmp/data_b"; }
while IFS= read -r op; do
  [ -z "$op" ] && continue
  for s in A B; do
    # shellcheck disable=SC2086
    r=$(PRISM_DATA_DIR=$(side $s) timeout 60 "$b/prism" run $op --repeat 200 2>&1)
    echo "$s $op : $(echo "$r" | grep -E '^pipelined|error|mismatch|FAIL' | head -2 | tr '\n' ' ')"
  done
done <<< "${OPS:-}" | tee "$out/ops.txt"
for round in $(seq "${ROUNDS:-2}"); do
  for dt in ${DTYPES:-f32 bf16}; do
    for s in A B; do
      PRISM_DATA_DIR=$(side $s) timeout 120 "$b/prism-llm" --preset qwen3-0.6b --dtype "$dt" \
        --prompt-len "${PROMPT_LEN:-128}" --new-tokens "${NEW_TOKENS:-64}" --graph on --repeat 3 \
        --breakdown-steps 0 --json "$tmp/r.json" > "$tmp/llm_${dt}_${s}_$round.txt" 2>&1
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], round(j['decode_tokens_per_s'],1), 'tokens/s', j['decode_step_commands'], 'commands', round(j['decode_kernel_ms_per_token'],3), 'ms of kernels', 'run-ahead', j['run_ahead'], 'tokens', hash(tuple(j['tokens'])) & 0xffffff)" \
        "$tmp/r.json" "round $round $dt $s:" || tail -3 "$tmp/llm_${dt}_${s}_$round.txt"
    done
  done
done | tee "$out/model.txt"
for f in "$tmp"/llm_*_1.txt; do echo "== $(basename "$f")"; sed -n '/^decode kernels/,/^$/p' "$f"; done > "$out/kernels.txt"
rm -rf "$tmp"
