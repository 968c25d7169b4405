#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# prism's main job: installs the dependencies, builds what the demo runs (not the tests or
# benchmarks), and shows prism at work on this machine's OpenCL devices: the device table, a
# sample kernel program, then the LLM decoder tuned against untuned, measured fairly.
#   PRISM_DEVICE          picks the device
#   PRISM_DEMO_BUDGET_S   pretune budget in seconds (default 90)
#   PRISM_DEMO_PRESET     model size (default demo; prism-llm --list-presets)
#   PRISM_DEMO_ARGS       extra prism-llm arguments, e.g. "--dtype bf16 --new-tokens 64"
#   PRISM_DEMO_SAMPLES    tuned/untuned pairs measured, interleaved (default 3)
#   PRISM_DEMO_BASELINE=0 skips the tuned-vs-untuned comparison
#   PRISM_DEMO_STEPS      the steps to run, in order (default: all of them; the list at the bottom)
# Steps are functions run in order by the list at the bottom: a new step is a function and one
# line there. A step may add prism-llm arguments to llm_args (e.g. --weights FILE).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PRISM_BUILD_DIR:-$root/build}
budget=${PRISM_DEMO_BUDGET_S:-90}
preset=${PRISM_DEMO_PRESET:-demo}
samples=${PRISM_DEMO_SAMPLES:-3}
read -r -a llm_args <<< "--preset $preset ${PRISM_DEMO_ARGS:-}"
baseline=${PRISM_DEMO_BASELINE:-1}
read -r -a chosen <<< "${PRISM_DEMO_STEPS:-}"
# prism warns about PRISM_* variables it does not read: the demo's own stop here.
unset PRISM_DEMO_BUDGET_S PRISM_DEMO_PRESET PRISM_DEMO_ARGS PRISM_DEMO_SAMPLES PRISM_DEMO_BASELINE \
  PRISM_DEMO_STEPS
work=$(mktemp -d -t prism-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
prism=$build/bin/prism
llm=$build/bin/prism-llm

step_build() {
  bash "$root/scripts/install-deps.sh"
  # Only the three programs the demo runs; an existing build tree keeps its other settings.
  PRISM_BUILD_TARGETS="prism_cli prism_llm_cli prism_consumer" bash "$root/scripts/build.sh"
}

step_devices() {
  echo
  echo "== prism devices"
  "$prism" devices
  echo
  echo "== sample kernel program (examples/consumer)"
  "$build/bin/prism_consumer"
}

# Pretune the model's shapes into the default tuning database. Resumable: a second run finds
# them tuned and goes straight on.
step_pretune() {
  echo
  echo "== pretune: the model's shapes into the default tuning database (budget ${budget} s)"
  local shapes=(--model prism-llm-demo)
  if [ "$preset" != demo ]; then
    # Other presets: record the shapes one short generation dispatches, then tune those.
    PRISM_TUNING_DB=$work/record.db PRISM_RECORD_UNTUNED=$work/shapes.yaml "$llm" "${llm_args[@]}" \
      --new-tokens 4 --warmup 0 --breakdown-steps 0 > /dev/null
    shapes=(--shapes "$work/shapes.yaml")
  fi
  "$prism" pretune "${shapes[@]}" --budget-s "$budget" --max-candidates 4 --max-runs 10 --progress lines \
    2> "$work/pretune.err" || { cat "$work/pretune.err"; return 1; }
}

# One prism-llm run without the dispatch log; prints "prefill_tok_s decode_tok_s". With an
# argument, that tuning database; without, the default one.
llm_rate() {
  if [ -n "${1:-}" ]; then
    PRISM_TUNING_DB=$1 "$llm" "${llm_args[@]}" --breakdown-steps 0 --json "$work/run.json" > /dev/null
  else
    "$llm" "${llm_args[@]}" --breakdown-steps 0 --json "$work/run.json" > /dev/null
  fi
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.1f %.1f" % (j["prefill_tokens_per_s"], j["decode_tokens_per_s"]))' \
    "$work/run.json"
}

# Tuned (default database) against untuned (an empty database: vendor defaults), both with the
# dispatch log off, in interleaved pairs (ABBA order, so drift favours neither), each pair a ratio.
step_compare() {
  [ "$baseline" = 0 ] && return 0
  echo
  echo "== tuned vs untuned: $samples interleaved pairs of prism-llm ${llm_args[*]}, dispatch log off in both"
  : > "$work/pairs.txt"
  for i in $(seq 1 "$samples"); do
    local u t
    if [ $((i % 2)) = 1 ]; then
      u=$(llm_rate "$work/empty.db")
      t=$(llm_rate)
    else
      t=$(llm_rate)
      u=$(llm_rate "$work/empty.db")
    fi
    echo "$u $t" >> "$work/pairs.txt"
    echo "  pair $i: untuned prefill/decode $u tok/s, tuned $t tok/s"
  done
  python3 - "$work/pairs.txt" << 'PY'
import statistics, sys
pairs = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
for name, col in (("prefill", 0), ("decode", 1)):
    ratios = [t[col + 2] / t[col] for t in pairs if t[col] > 0]
    if not ratios:
        continue
    print(f"  {name}: tuned/untuned {statistics.median(ratios):.2f}x (median of {len(ratios)} pairs; "
          f"range {min(ratios):.2f}x-{max(ratios):.2f}x)")
PY
}

# A run with the dispatch log on, then the log read back: its first lines and its summary.
step_log() {
  echo
  echo "== prism-llm ${llm_args[*]}, tuned, PRISM_LOG_DISPATCH=1 into a CSV file"
  local log=$work/dispatch.csv
  PRISM_LOG_DISPATCH=1 PRISM_LOG_DISPATCH_FILE=$log "$llm" "${llm_args[@]}" --breakdown-steps 0 2> /dev/null |
    grep -E '^(prefill|decode) '
  echo
  echo "== the dispatch log ($(grep -c '^prism_dispatch,' "$log") lines; the first ones, cut to 100 columns):"
  head -n 4 "$log" | cut -c1-100
  echo
  echo "== prism log summarize: calls per op, backend and routing tier (db-exact / db-nearest ="
  echo "   tuning database hits), then the database's share of all dispatches"
  "$prism" log summarize "$log"
  echo
  echo "== a linear line of the log replayed (prism run --replay)"
  "$prism" run --repeat 3 --replay "$(grep -m1 -E '^prism_dispatch,v2,exec,[^,]*,[0-9]+,linear,' "$log")"
}

step_profile() {
  echo
  echo "== per-step device time: a short run with PRISM_LOG_DISPATCH=profile (each op timed on a drained queue)"
  PRISM_LOG_DISPATCH=profile PRISM_LOG_DISPATCH_FILE=$work/profile.csv "$llm" "${llm_args[@]}" \
    --new-tokens 2 --breakdown-steps 8 2> /dev/null | sed -n '/^per-step/,/^  total/p'
}

# A real-format checkpoint (scripts/demo-model.sh): PRISM_DEMO_MODEL=DIR|FILE.gguf, or a small
# random Llama written as a Hugging Face folder; text in, streamed text out.
step_model() {
  bash "$root/scripts/demo-model.sh"
}

# --- demo steps of other parts go into this list ---
steps=(build devices pretune compare log profile model)
# PRISM_DEMO_STEPS picks some of them (tests/examples/demo_main_job.sh runs all but build).
for s in "${chosen[@]}"; do
  [[ " ${steps[*]} " == *" $s "* ]] ||
    { echo "demo.sh: unknown step '$s' in PRISM_DEMO_STEPS; valid: ${steps[*]}" >&2; exit 2; }
done
[ ${#chosen[@]} -gt 0 ] || chosen=("${steps[@]}")
for s in "${chosen[@]}"; do "step_$s"; done
