#!/bin/sh
# `prism db` end to end: import -> list/show/stats/check -> export -> merge -> clear, on temp files.
# Usage: cli_db_test.sh PRISM_BINARY
set -eu
prism="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$dir/in.json" <<'JSON'
{"format":"prism-tuning","version":1,
 "devices":[{"fingerprint":"aaaaaaaaaaaaaaaa","name":"GPU A","driver_version":"1.0"}],
 "results":[
  {"device":"aaaaaaaaaaaaaaaa","op":"matmul","dtype":"f32","shape":"m=1,n=4096,k=4096","backend":"clblast",
   "config":"KWG=16","p50_ns":12000,"default_ns":30000,"driver_version":"1.0"},
  {"device":"aaaaaaaaaaaaaaaa","op":"matmul","dtype":"f32","shape":"m=16,n=4096,k=4096","backend":"opencl",
   "config":"wg=64","p50_ns":22000,"default_ns":33000,"driver_version":"1.0"}]}
JSON
"$prism" db import "$dir/in.json" --db "$dir/a.db" | grep -q "2 new" || fail "import"
"$prism" db list --db "$dir/a.db" | grep -q "m=16,n=4096,k=4096  opencl" || fail "list"
"$prism" db show matmul f32 k=4096,n=4096,m=1 --db "$dir/a.db" | grep -q "winner: clblast KWG=16" || fail "show"
"$prism" db stats --db "$dir/a.db" | grep -q "GPU A .* matmul .* 2 .* 1.94x" || fail "stats"
"$prism" db check --db "$dir/a.db" | grep -q "integrity: ok" || fail "check"
"$prism" db export "$dir/out.json" --db "$dir/a.db" --op matmul 2>/dev/null
grep -q '"config": "KWG=16"' "$dir/out.json" || fail "export"
# PRISM_TUNING_DB is honoured; merge keeps the faster row per key.
sed 's/"p50_ns":12000/"p50_ns":9000/; s/KWG=16/KWG=32/' "$dir/in.json" > "$dir/faster.json"
PRISM_TUNING_DB="$dir/b.db" "$prism" db import "$dir/faster.json" >/dev/null
"$prism" db merge "$dir/b.db" --db "$dir/a.db" | grep -q "1 replaced (faster), 1 kept" || fail "merge"
"$prism" db show matmul f32 m=1,n=4096,k=4096 --db "$dir/a.db" | grep -q "KWG=32" || fail "merge result"
if "$prism" db clear --db "$dir/a.db" 2>/dev/null; then fail "clear without --yes"; fi
"$prism" db clear --yes --op matmul --db "$dir/a.db" | grep -q "removed 2 rows" || fail "clear"
"$prism" db vacuum --db "$dir/a.db" >/dev/null
echo "prism db: ok"
