#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Shape components are checked against the device before anything is allocated (issue 15):
# negative and too-large components are refused at once, naming both sizes and the valid range.
# Usage: cli_shape_limits_test.sh PRISM_BINARY
set -eu
prism="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
refused() {  # refused "expected message part" args...
  want="$1"; shift
  # 60 s is far more than a refusal takes; an allocation of the size asked for would not finish.
  if timeout 60 "$prism" "$@" > "$dir/out" 2>&1; then fail "accepted: $*"; fi
  grep -qF -- "$want" "$dir/out" || { cat "$dir/out" >&2; fail "message for: $*"; }
}
export PRISM_TUNING_DB="$dir/t.db"
refused "add shape component n=-5 is negative; valid n: 0 to" run add --shape n=-5
refused "add shape component n=9223372036854775807 needs at least" run add --shape n=9223372036854775807
refused "per buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE); valid n: 0 to" run add --shape n=9223372036854775807
# Just above the device's largest allocation in f32 elements.
max=$("$prism" devices --json | sed -n 's/.*"max_alloc_bytes": *\([0-9]*\).*/\1/p' | head -1)
[ -n "$max" ] || fail "prism devices --json has no max_alloc_bytes"
n=$((max / 4 + 1))
refused "add shape component n=$n needs at least" run add --shape n=$n
printf 'shapes:\n  - {op: add, n: %s}\n' "$n" > "$dir/big.yaml"
refused "needs at least" pretune --shapes "$dir/big.yaml" --db "$dir/p.db" --progress lines
echo "shape limits: ok"
