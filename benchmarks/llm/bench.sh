#!/usr/bin/env bash
# prism-llm throughput, same model and seed under four setups, each in its own process:
#   untuned  : an empty tuning database (vendor defaults); records the shapes it dispatched
#   tuned    : after `prism pretune` of exactly those shapes into a fresh database
#   host     : every op forced to the host backend (--backend host; OpenBLAS + host references)
# and prints a Markdown table for benchmarks/llm/RESULTS.md.
#
# usage: benchmarks/llm/bench.sh [BUILD_DIR]
# env:   PRESET (demo) DTYPE (f32) PROMPT_LEN (64) NEW_TOKENS (32) BUDGET_S (120, pretune budget)
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
args=(--preset "$preset" --dtype "$dtype" --prompt-len "$prompt_len" --new-tokens "$new_tokens" --breakdown-steps 0)

field() { sed -n "s/^  \"$2\": \([0-9.e+-]*\),\{0,1\}$/\1/p" "$1"; }

echo "== untuned (empty database $work/untuned.db), recording shapes to $work/shapes.yaml"
rm -f "$work/untuned.db" "$work/shapes.yaml"
PRISM_TUNING_DB=$work/untuned.db PRISM_RECORD_UNTUNED=$work/shapes.yaml "$llm" "${args[@]}" --json "$work/untuned.json" \
  | grep -E '^(model|device|prefill|decode)'

echo "== pretune of those shapes into $work/tuned.db (budget ${budget} s)"
"$prism" pretune --shapes "$work/shapes.yaml" --db "$work/tuned.db" --budget-s "$budget" | tail -n 25

echo "== tuned"
PRISM_TUNING_DB=$work/tuned.db "$llm" "${args[@]}" --json "$work/tuned.json" | grep -E '^(prefill|decode)'

echo "== every op on host"
PRISM_TUNING_DB=$work/untuned.db "$llm" "${args[@]}" --backend host --json "$work/host.json" | grep -E '^(prefill|decode)'

device=$(sed -n 's/^  "device": "\(.*\)",$/\1/p' "$work/untuned.json")
model=$(sed -n 's/^  "model": "\(.*\)",$/\1/p' "$work/untuned.json")
up=$(field "$work/untuned.json" prefill_tokens_per_s)
ud=$(field "$work/untuned.json" decode_tokens_per_s)
echo
echo "### prism-llm $preset, $dtype, prompt $prompt_len, $new_tokens new tokens — $(date -u +%Y-%m-%d), $device"
echo
echo "model: $model"
echo
echo "| setup | prefill tokens/s | decode tokens/s | prefill vs untuned | decode vs untuned |"
echo "|---|---:|---:|---:|---:|"
for setup in untuned tuned host; do
  p=$(field "$work/$setup.json" prefill_tokens_per_s)
  d=$(field "$work/$setup.json" decode_tokens_per_s)
  awk -v s="$setup" -v p="$p" -v d="$d" -v up="$up" -v ud="$ud" \
    'BEGIN { printf "| %s | %.1f | %.1f | %.2fx | %.2fx |\n", s, p, d, p / up, d / ud }'
done
echo
echo "(raw JSON in $work)"
