#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `prism pretune` refuses bad numeric options, an empty selection and an empty --db with a
# message naming the option and the valid range, before it touches a device or a database.
# Usage: cli_pretune_options_test.sh PRISM_BINARY
set -eu
prism="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
refused() {  # refused "expected message part" args...
  want="$1"; shift
  if "$prism" pretune --db "$dir/t.db" "$@" > "$dir/out" 2>&1; then fail "accepted: $*"; fi
  grep -qF -- "$want" "$dir/out" || { cat "$dir/out" >&2; fail "message for: $*"; }
}
refused "--budget-s must be a number of seconds in [0, 1e9]" --model llama-2-7b --budget-s -1
refused "--budget-s must be a number of seconds in [0, 1e9]" --model llama-2-7b --budget-s nan
refused "--budget-s must be a number of seconds in [0, 1e9]" --model llama-2-7b --budget-s inf
refused "--seed must be a whole number in [0, 18446744073709551615], got '-1'" --model llama-2-7b --seed -1
refused "--max-candidates must be a whole number in [1, 100000]" --model llama-2-7b --max-candidates -1
refused "--min-runs must be a whole number in [1, 100000]" --model llama-2-7b --min-runs 0
refused "--max-runs must be a whole number in [1, 100000]" --model llama-2-7b --max-runs 1e9
refused "--pipeline must be a whole number in [1, 1000], got '0'" --model llama-2-7b --pipeline 0
refused "--compile-threads must be a whole number in [0, 64]" --model llama-2-7b --compile-threads 65
refused "--order: size not in {payoff,file}" --model llama-2-7b --order size
refused "has no entry for --dtypes f99 (its dtypes:" --model llama-2-7b --dtypes f99
refused "has no entry for --ops nope (its ops:" --model llama-2-7b --ops nope
if "$prism" pretune --model llama-2-7b --db "" > "$dir/out" 2>&1; then fail "accepted --db ''"; fi
grep -qF -- "--db: needs a file name or a postgresql:// URL, got an empty string" "$dir/out" || { cat "$dir/out" >&2; fail "--db '' message"; }
[ ! -e "$dir/t.db" ] || fail "a refused pretune created the database"
echo "prism pretune options: ok"
