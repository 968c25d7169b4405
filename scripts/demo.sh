#!/usr/bin/env bash
# prism's main job: installs the dependencies, builds, and shows prism at work on this machine's
# OpenCL devices: the device table, then a sample kernel program (examples/consumer: SAXPY
# through buffers and accessors, verified on the host). PRISM_DEVICE picks the device.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PRISM_BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

echo
echo "== prism devices"
"$build/bin/prism" devices

echo
echo "== sample kernel program (examples/consumer)"
"$build/bin/prism_consumer"

# --- demo steps of other parts go below this line ---

# The LLM decoder (examples/llm, helper llm): pretune its shapes into the default tuning
# database, then run it with the dispatch log on. Resumable: a second run finds the shapes
# tuned ("already tuned") and goes straight to the model, which then hits the database.
#   PRISM_DEMO_BUDGET_S   pretune budget in seconds (default 90)
#   PRISM_DEMO_PRESET     model size (default demo; prism-llm --list-presets)
#   PRISM_DEMO_ARGS       extra prism-llm arguments, e.g. "--dtype bf16 --new-tokens 64"
#   PRISM_DEMO_BASELINE=0 skips the untuned baseline run
budget=${PRISM_DEMO_BUDGET_S:-90}
preset=${PRISM_DEMO_PRESET:-demo}
read -r -a extra <<< "${PRISM_DEMO_ARGS:-}"
shapes_model=prism-llm-demo
work=$(mktemp -d -t prism-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo
echo "== pretune: the demo model's shapes into the default tuning database (budget ${budget} s)"
if [ "$preset" = demo ]; then
  "$build/bin/prism" pretune --model "$shapes_model" --budget-s "$budget" --max-candidates 4 --max-runs 10 \
    --progress lines 2>&1 | grep -v -e '^pretune: \[' -e '(earlier run)$' || true
else
  # Other presets: record the shapes one short generation dispatches, then tune those.
  PRISM_TUNING_DB=$work/record.db PRISM_RECORD_UNTUNED=$work/shapes.yaml "$build/bin/prism-llm" --preset "$preset" \
    "${extra[@]}" --new-tokens 4 --warmup 0 --breakdown-steps 0 > /dev/null
  "$build/bin/prism" pretune --shapes "$work/shapes.yaml" --budget-s "$budget" --max-candidates 4 --max-runs 10 \
    --progress lines 2>&1 | grep -v -e '^pretune: \[' -e '(earlier run)$' || true
fi

if [ "${PRISM_DEMO_BASELINE:-1}" != 0 ]; then
  echo
  echo "== prism-llm --preset $preset, untuned baseline (an empty tuning database: vendor defaults)"
  PRISM_TUNING_DB=$work/empty.db "$build/bin/prism-llm" --preset "$preset" "${extra[@]}" --breakdown-steps 0 \
    | grep -E '^(prefill|decode) '
fi

echo
echo "== prism-llm --preset $preset, tuned (default database), PRISM_LOG_DISPATCH=1"
log=$work/dispatch.log
PRISM_LOG_DISPATCH=1 PRISM_LOG_DISPATCH_FILE=$log "$build/bin/prism-llm" --preset "$preset" "${extra[@]}" \
  --breakdown-steps 0

echo
echo "== dispatch log ($(grep -c '^prism_dispatch,' "$log") lines; the first ones):"
head -n 4 "$log" | cut -c1-200
echo
echo "== the dispatcher's exit summary: calls per op, backend and routing tier (db-exact / db-nearest ="
echo "   tuning database hits), then the database's share of all dispatches"
sed -n '/^prism dispatch summary/,$p' "$log"

echo
echo "== per-step device time: a short run with PRISM_LOG_DISPATCH=profile (each op timed on a drained queue)"
PRISM_LOG_DISPATCH=profile PRISM_LOG_DISPATCH_FILE=$work/profile.log "$build/bin/prism-llm" --preset "$preset" \
  "${extra[@]}" --new-tokens 2 --breakdown-steps 8 | sed -n '/^per-step/,/^  total/p'

# A real-format checkpoint (examples/llm, helper checkpoints): PRISM_DEMO_MODEL=DIR|FILE.gguf, or a
# small random Llama written as a Hugging Face folder; text in, streamed text out.
bash "$root/scripts/demo-model.sh"
