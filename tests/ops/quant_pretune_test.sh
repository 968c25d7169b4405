#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Quantized weights are a dtype like any other to pretune, the tuning database and the
# dispatcher: a shape set naming q4_0 tunes linear with a q4_0 weight, and the dispatcher then
# serves that call from the stored row (db-exact) with the quantized implementation; the same
# with bf16 activations (act: bf16, prism run --act bf16).
# Usage: quant_pretune_test.sh PRISM_BINARY
set -eu
prism="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$dir/shapes.yaml" << 'YAML'
model: quant-test
dtypes: [q4_0]
shapes:
  - {op: linear, m: 1, n: 64, k: 64}
YAML
"$prism" pretune --shapes "$dir/shapes.yaml" --db "$dir/t.db" --max-candidates 3 --progress lines > "$dir/pretune" 2>&1 ||
  { cat "$dir/pretune" >&2; fail "pretune"; }
grep -q "linear q4_0 \[m=1,n=64,k=64\]" "$dir/pretune" || { cat "$dir/pretune" >&2; fail "no q4_0 row tuned"; }
PRISM_TUNING_DB="$dir/t.db" "$prism" run linear --dtype q4_0 --shape m=1,n=64,k=64 --dry-run > "$dir/run" 2>&1 ||
  { cat "$dir/run" >&2; fail "run"; }
grep -q "impl=opencl.quant .*tier=db-exact" "$dir/run" || { cat "$dir/run" >&2; fail "not served from the q4_0 row"; }
# The dispatch log names the call's dtypes; replaying its line runs the quantized call again.
PRISM_TUNING_DB="$dir/t.db" PRISM_LOG_DISPATCH=1 "$prism" run linear --dtype q4_0 --shape m=2,n=64,k=96 --repeat 0 \
  > /dev/null 2> "$dir/log"
line=$(grep "^prism_dispatch,v2,exec," "$dir/log" | grep ",linear," | head -1)
echo "$line" | grep -q "f32|q4_0|f32" || { cat "$dir/log" >&2; fail "log line without the q4_0 weight"; }
PRISM_TUNING_DB="$dir/t.db" "$prism" run --replay "$line" --repeat 0 > "$dir/replay" 2>&1 ||
  { cat "$dir/replay" >&2; fail "replay"; }
grep -q "weight=q4_0\[64, 96\]" "$dir/replay" || { cat "$dir/replay" >&2; fail "replay lost the q4_0 weight"; }
grep -q "PASS" "$dir/replay" || { cat "$dir/replay" >&2; fail "replay check"; }
# The float call of the same shape has rows of its own: none here.
PRISM_TUNING_DB="$dir/t.db" "$prism" run linear --dtype f32 --shape m=1,n=64,k=64 --dry-run > "$dir/f32" 2>&1
if grep -q "tier=db-exact" "$dir/f32"; then cat "$dir/f32" >&2; fail "the f32 call used the q4_0 row"; fi
# A 16-bit model's call (act: bf16) is its own entry and row: pretune samples bf16 activations,
# `prism run --act bf16` is then served from that row, and replaying its log line keeps them.
cat > "$dir/bf16.yaml" << 'YAML'
shapes:
  - {op: linear, dtype: q4_0, act: bf16, m: 1, n: 64, k: 64}
YAML
"$prism" pretune --shapes "$dir/bf16.yaml" --db "$dir/t.db" --max-candidates 1 --progress lines > "$dir/pretune16" 2>&1 ||
  { cat "$dir/pretune16" >&2; fail "pretune act: bf16"; }
grep -q "linear q4_0 act=bf16 \[m=1,n=64,k=64\]" "$dir/pretune16" || { cat "$dir/pretune16" >&2; fail "no bf16 row tuned"; }
PRISM_TUNING_DB="$dir/t.db" "$prism" run linear --dtype q4_0 --act bf16 --shape m=1,n=64,k=64 --dry-run > "$dir/run16" 2>&1 ||
  { cat "$dir/run16" >&2; fail "run --act bf16"; }
grep -q "input=bf16\[1, 64\]" "$dir/run16" && grep -q "tier=db-exact" "$dir/run16" ||
  { cat "$dir/run16" >&2; fail "the bf16 call not served from its row"; }
PRISM_TUNING_DB="$dir/t.db" PRISM_LOG_DISPATCH=1 "$prism" run linear --dtype q4_0 --act bf16 --shape m=2,n=64,k=96 \
  --repeat 0 > /dev/null 2> "$dir/log16"
line=$(grep "^prism_dispatch,v2,exec," "$dir/log16" | grep ",linear," | head -1)
PRISM_TUNING_DB="$dir/t.db" "$prism" run --replay "$line" --repeat 0 > "$dir/replay16" 2>&1 ||
  { cat "$dir/replay16" >&2; fail "replay of the bf16 call"; }
grep -q "input=bf16\[2, 96\], weight=q4_0\[64, 96\]" "$dir/replay16" || { cat "$dir/replay16" >&2; fail "replay lost the bf16 activations"; }
if "$prism" run linear --dtype f16 --act bf16 --shape m=1,n=64,k=64 > "$dir/bad" 2>&1; then fail "--act with a float dtype"; fi
grep -q "dtype f16 is not one (valid: q8_0, q4_0, q4_1)" "$dir/bad" || { cat "$dir/bad" >&2; fail "--act message"; }
echo "quantized pretune: ok"
