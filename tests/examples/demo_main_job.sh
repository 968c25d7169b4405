#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README's first command, scripts/demo.sh, on a built tree: every step but the install and
# build (PRISM_DEMO_STEPS), with a short pretune budget, one tuned/untuned pair, and HOME pointed
# at an empty folder, so that the demo writes the default tuning database (~/.cache/prism) there
# and not into the user's. Fails when a step fails or when its output loses what the README
# promises: the device table, the sample kernel, the pretune summary, the tuned/untuned ratios,
# the dispatch log's summary and a replayed line, the per-step times and the checkpoint's text.
# Usage: demo_main_job.sh <source dir> <build dir> <work dir>
set -euo pipefail
source=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work/home"
# PoCL keeps its kernel cache under HOME too: keep using the real one, so that moving HOME does
# not make every kernel compile again.
export POCL_CACHE_DIR=${POCL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pocl/kcache}
export HOME=$work/home
unset XDG_CACHE_HOME PRISM_TUNING_DB
out=$work/demo.txt
PRISM_BUILD_DIR=$build PRISM_DEMO_STEPS="devices pretune compare log profile model" PRISM_DEMO_BUDGET_S=20 \
  PRISM_DEMO_SAMPLES=1 bash "$source/scripts/demo.sh" > "$out" 2>&1 || {
  cat "$out"
  echo "demo_main_job.sh: scripts/demo.sh failed" >&2
  exit 1
}
cat "$out"
expect() { # pattern, what it stands for
  grep -Eq -- "$1" "$out" || {
    echo "demo_main_job.sh: the demo's output lacks $2 (pattern '$1')" >&2
    exit 1
  }
}
expect '^0\* +cpu|^0\* +gpu' "the device table's default device"
expect 'saxpy over [0-9]+ floats: .* results verified' "the sample kernel program"
expect '^[0-9]+ tuned, [0-9]+ already tuned, [0-9]+ failed, [0-9]+ left' "the pretune summary"
expect '^  decode: tuned/untuned [0-9.]+x' "the tuned/untuned decode ratio"
expect '^decode +[0-9]+ tokens in' "the logged run's decode rate"
expect '^tuning database hits: [0-9]+ of [0-9]+ calls' "the dispatch log's summary"
expect '^check: +PASS' "the replayed log line's check"
expect '^  total +[0-9.]+ +[0-9.]+' "the per-step time table"
expect '^text +"' "the checkpoint's generated text"
# The pretune step wrote the default database, under the (moved) HOME.
db=$HOME/.cache/prism/tuning.db
[ -s "$db" ] || {
  echo "demo_main_job.sh: no tuning database at the default path $db" >&2
  exit 1
}
echo "demo_main_job.sh: PASS (default database $db)"
