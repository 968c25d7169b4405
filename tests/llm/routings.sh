#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs prism-llm (tiny preset, f32, fixed seed) under three routings and requires identical
# generated token ids, each also checked against the host reference (--check):
#   default routes | every op forced to host (--backend host) | GEMMs on CLBlast (routes file).
# usage: routings.sh PRISM_LLM WORK_DIR
set -euo pipefail
bin=$1
dir=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
common=(--preset tiny --prompt-len 12 --new-tokens 16 --seed 3 --warmup 0 --breakdown-steps 0 --check)

run() {
  local name=$1
  shift
  rm -f "$dir/$name.dispatch.log"  # logs append: start each run's file afresh
  if ! PRISM_LOG_DISPATCH=1 PRISM_LOG_DISPATCH_FILE="$dir/$name.dispatch.log" "$bin" "${common[@]}" "$@" \
      >"$dir/$name.out" 2>"$dir/$name.err"; then
    echo "routing '$name' failed ($*):"
    cat "$dir/$name.out" "$dir/$name.err"
    exit 1
  fi
  grep '^output' "$dir/$name.out" | sed "s/^/$name: /"
}

run default
run host --backend host
run clblast_gemm --routes "$here/clblast_gemm.yaml"

ref=$(grep '^output' "$dir/default.out")
for name in host clblast_gemm; do
  if [ "$(grep '^output' "$dir/$name.out")" != "$ref" ]; then
    echo "token ids differ between default and $name routing"
    exit 1
  fi
done
# The forced routings must really have taken effect: the log names the backends.
grep -q ',host,' "$dir/host.dispatch.log" || { echo "no host dispatch in the --backend host log"; exit 1; }
grep -q ',clblast,' "$dir/clblast_gemm.dispatch.log" || { echo "no clblast dispatch in the routes-file log"; exit 1; }
echo "token ids identical across 3 routings"
