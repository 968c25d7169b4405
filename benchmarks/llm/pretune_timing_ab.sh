#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Pretune's timing A/B (docs/tuning.md, "Timing"): a model's shapes recorded once (exact), then
# tuned twice into fresh databases, first in runs of calls back to back (the default; this one
# also builds the programs, so its time is the one to hold against a pretune target), then one
# finished call a timed run (--pipeline 1), each timed; then decode rounds interleaved: untuned,
# the one-call database, the back-to-back one. Works on any device (PRISM_DEVICE); on the GPU
# machine run it from the repository root with the bundle (.gpu: prism, prism-llm, data/vendors)
# carried (it sources benchmarks/gpu/bundle_env.sh when .gpu exists).
# usage: benchmarks/llm/pretune_timing_ab.sh [BUILD_BIN]
# env: PRESET (qwen3-0.6b) DTYPE (f32) STEPS (letters: p pretunes, d decode rounds; pd) ROUNDS (3)
#      WORK (/tmp/prism-pretune-ab: shapes and databases, kept between calls) BUDGET (pretune s, 0)
#      LLM_ARGS (extra prism-llm arguments, e.g. "--model x.gguf --quantize q4_0")
set -u
if [ -d .gpu ]; then source benchmarks/gpu/bundle_env.sh; bin=$G/bin; else bin=${1:-build/bin}; fi
preset=${PRESET:-qwen3-0.6b} dtype=${DTYPE:-f32} steps=${STEPS:-pd} work=${WORK:-/tmp/prism-pretune-ab}
mkdir -p "$work"
llm() {
  timeout 300 "$bin/prism-llm" ${LLM_ARGS:---preset $preset} --dtype "$dtype" --prompt-len 128 --new-tokens 32 \
    --breakdown-steps 0 "$@"
}
field() { sed -n "s/.*\"$2\": \([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
case $steps in *p*)
  rm -f "$work"/shapes.yaml "$work"/one.db* "$work"/piped.db* "$work"/empty.db*
  PRISM_TUNING_DB=$work/empty.db PRISM_RECORD_UNTUNED_EXACT=1 PRISM_RECORD_UNTUNED=$work/shapes.yaml \
    llm --graph off --repeat 1 > "$work/record.txt" 2>&1
  echo "recorded $(grep -c 'op:' "$work/shapes.yaml") shapes"
  for form in piped one; do  # the first also builds the programs (the target check is on it)
    opt=(); [ $form = one ] && opt=(--pipeline 1)
    t0=$(date +%s.%N)
    timeout 400 "$bin/prism" pretune --shapes "$work/shapes.yaml" --db "$work/$form.db" --budget-s "${BUDGET:-0}" \
      --progress lines --json "${opt[@]}" > "$work/$form.json" 2> "$work/$form.err"
    echo "pretune $form: exit $? in $(python3 -c "import time; print(f'{time.time() - $t0:.1f}')") s: $(tail -1 "$work/$form.err")"
  done;; esac
case $steps in *d*)
  for r in $(seq "${ROUNDS:-3}"); do
    line="round $r:"
    for form in empty one piped; do
      PRISM_TUNING_DB=$work/$form.db llm --graph on --repeat 2 --json "$work/d.json" > /dev/null 2>&1
      line="$line $form $(field "$work/d.json" decode_tokens_per_s) (prefill $(field "$work/d.json" prefill_tokens_per_s))"
    done
    echo "$line"
  done;; esac
true
