#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 12 item 4: no shipped profile's default route may be more than 1.5x slower than the best
# route measured for any shape of benchmarks/tuning/*.yaml and of the presets' recorded shapes.
#
# For each preset (and dtype) it records the shapes prism-llm dispatches (PRISM_RECORD_UNTUNED,
# exact keys), then runs prism_bench_tuning on that set and on every benchmarks/tuning/*.yaml:
# pretune into a fresh database with every backend a candidate (host included), then the default
# route, the tuned route and CLBlast's defaults interleaved, short shapes as runs of calls back
# to back. The markdown tables (one a set, each with the "default / best" column and the item-4
# verdict) are appended to OUT/audit.md; each set's tuning database is kept as OUT/LABEL.db, and
# a rerun with KEEP_DB=1 resumes it (pretune skips the shapes it has), so that a changed profile
# can be audited again without tuning anew.
#
# Usage: benchmarks/tuning/routes_audit.sh [OUT_DIR]
# Env: BIN (default build/bin), PRESETS (default "demo small"; "none": the shape files only),
#      DTYPES (default "f32"), QUANT (e.g. q4_0: the presets' linear weights quantized at load;
#      default none), SETS (shape files; default benchmarks/tuning/*.yaml; "none" skips them), ROUNDS (5),
#      BACKENDS (opencl,clblast,host), MAX_CANDIDATES (12), BUDGET_S (pretune's budget a set, 0:
#      none), LLM_ARGS (extra prism-llm flags),
#      PRISM_DEVICE (the device).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/prism-routes-audit}
BIN=${BIN:-build/bin}
PRESETS=${PRESETS:-demo small}
DTYPES=${DTYPES:-f32}
ROUNDS=${ROUNDS:-5}
BACKENDS=${BACKENDS:-opencl,clblast,host}
MAX_CANDIDATES=${MAX_CANDIDATES:-12}
SETS=${SETS:-$(ls benchmarks/tuning/*.yaml)}
[ "$SETS" = none ] && SETS=""
[ "$PRESETS" = none ] && PRESETS=""
mkdir -p "$OUT"
for tool in prism-llm prism_bench_tuning; do
  [ -x "$BIN/$tool" ] || { echo "routes_audit.sh: $BIN/$tool not found (build first, or set BIN)" >&2; exit 2; }
done

audit() {  # audit SHAPES_FILE LABEL
  echo "== $2: $1" >&2
  [ "${KEEP_DB:-0}" = 1 ] || rm -f "$OUT/$2.db" "$OUT/$2.db-wal" "$OUT/$2.db-shm"
  "$BIN/prism_bench_tuning" --shapes "$1" --db "$OUT/$2.db" --backends "$BACKENDS" --with-clblast \
    --max-candidates "$MAX_CANDIDATES" --budget-s "${BUDGET_S:-0}" --rounds "$ROUNDS" --markdown "$OUT/audit.md" \
    --benchmark_filter='^$' > "$OUT/$2.log" 2>&1 || { echo "routes_audit.sh: $2 failed, see $OUT/$2.log" >&2; exit 1; }
  grep -E 'issue 12 item 4' "$OUT/$2.log" >&2
}

record() {  # record PRESET DTYPE LABEL: one prefill and a few decode steps, every key once
  PRISM_RECORD_UNTUNED="$OUT/$3.yaml" PRISM_RECORD_UNTUNED_EXACT=1 "$BIN/prism-llm" --preset "$1" \
    --dtype "$2" ${QUANT:+--quantize "$QUANT"} --prompt-len 32 --new-tokens 4 --ignore-eos --graph off \
    --max-context 512 ${LLM_ARGS:-} > "$OUT/$3.record.log" 2>&1 ||
    { echo "routes_audit.sh: recording $3 failed, see $OUT/$3.record.log" >&2; exit 1; }
}

for p in $PRESETS; do
  for d in $DTYPES; do
    label="$p-$d${QUANT:+-$QUANT}"
    if [ "${KEEP_DB:-0}" != 1 ] || [ ! -s "$OUT/$label.yaml" ]; then
      rm -f "$OUT/$label.yaml"
      record "$p" "$d" "$label"
    fi
    audit "$OUT/$label.yaml" "$label"
  done
done
for s in $SETS; do audit "$s" "$(basename "$s" .yaml)"; done
echo "tables: $OUT/audit.md" >&2
