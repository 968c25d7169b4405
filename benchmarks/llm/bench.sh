#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# prism-llm throughput, same model and seed under four setups, each in its own process:
#   untuned  : an empty tuning database (vendor defaults); records the shapes it dispatched
#   tuned    : after `prism pretune` of exactly those shapes into a fresh database
#   host     : every op forced to the host backend (--backend host; OpenBLAS + host references)
# and prints a Markdown table for benchmarks/RESULTS.md.
#
# usage: benchmarks/llm/bench.sh [BUILD_DIR]
# env:   PRESET (demo) DTYPE (f32) PROMPT_LEN (64) NEW_TOKENS (32) BUDGET_S (120, pretune budget)
#        MAX_CANDIDATES (6, pretune candidates per backend and shape) REPEAT (3, best of N generations)
#        ROUNDS (2, interleaved rounds of the three setups)
#        PRISM_DEVICE (device spec) WORK (scratch dir; default: a new temp dir)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
llm=$build/bin/prism-llm
prism=$build/bin/prism
preset=${PRESET:-demo}
dtype=${DTYPE:-f32}
prompt_len=${PROMPT_LEN:-64}
new_tokens=${NEW_TOKENS:-32}
budget=${BUDGET_S:-120}
work=${WORK:-$(mktemp -d -t prism-llm-bench.XXXXXX)}
mkdir -p "$work"
for exe in "$llm" "$prism"; do
  [ -x "$exe" ] || { echo "bench.sh: $exe not built (cmake --build $build --target prism_cli prism_llm_cli)"; exit 1; }
done
args=(--preset "$preset" --dtype "$dtype" --prompt-len "$prompt_len" --new-tokens "$new_tokens" --breakdown-steps 0 --repeat "${REPEAT:-3}")

field() { sed -n "s/^  \"$2\": \([0-9.e+-]*\),\{0,1\}$/\1/p" "$1"; }

echo "== untuned (empty database $work/untuned.db), recording shapes to $work/shapes.yaml"
rm -f "$work/untuned.db" "$work/shapes.yaml"
PRISM_TUNING_DB=$work/untuned.db PRISM_RECORD_UNTUNED=$work/shapes.yaml "$llm" "${args[@]}" --json "$work/untuned.json" \
  | grep -E '^(model|device|prefill|decode)'

echo "== pretune of those shapes into $work/tuned.db (budget ${budget} s)"
"$prism" pretune --shapes "$work/shapes.yaml" --db "$work/tuned.db" --budget-s "$budget" \
  --max-candidates "${MAX_CANDIDATES:-6}" --progress lines 2>&1 | grep -v "^pretune: \\[" | tail -n 40 || true

# The machine may be shared: run the setups interleaved, ROUNDS times, and keep each one's best.
rounds=${ROUNDS:-2}
for round in $(seq 1 "$rounds"); do
  echo "== round $round/$rounds: untuned, tuned, host"
  PRISM_TUNING_DB=$work/untuned.db "$llm" "${args[@]}" --json "$work/untuned.$round.json" > /dev/null
  PRISM_TUNING_DB=$work/tuned.db "$llm" "${args[@]}" --json "$work/tuned.$round.json" > /dev/null
  PRISM_TUNING_DB=$work/untuned.db "$llm" "${args[@]}" --backend host --json "$work/host.$round.json" > /dev/null
done
best() {  # best() SETUP FIELD: the highest value over the rounds
  for round in $(seq 1 "$rounds"); do field "$work/$1.$round.json" "$2"; done | sort -g | tail -n 1
}

device=$(sed -n 's/^  "device": "\(.*\)",$/\1/p' "$work/untuned.json")
model=$(sed -n 's/^  "model": "\(.*\)",$/\1/p' "$work/untuned.json")
up=$(best untuned prefill_tokens_per_s)
ud=$(best untuned decode_tokens_per_s)
echo
echo "### prism-llm $preset, $dtype, prompt $prompt_len, $new_tokens new tokens — $(date -u +%Y-%m-%d), $device"
echo
echo "best of $rounds interleaved rounds x ${REPEAT:-3} generations per setup"
echo
echo "model: $model"
echo
echo "| setup | prefill tokens/s | decode tokens/s | prefill vs untuned | decode vs untuned |"
echo "|---|---:|---:|---:|---:|"
for setup in untuned tuned host; do
  p=$(best "$setup" prefill_tokens_per_s)
  d=$(best "$setup" decode_tokens_per_s)
  awk -v s="$setup" -v p="$p" -v d="$d" -v up="$up" -v ud="$ud" \
    'BEGIN { printf "| %s | %.1f | %.1f | %.2fx | %.2fx |\n", s, p, d, p / up, d / ud }'
done
echo
echo "(raw JSON in $work)"
