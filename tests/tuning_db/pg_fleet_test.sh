#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# 8 processes, as if 8 machines, pretune overlapping shape sets into one PostgreSQL server at
# the same time: no process fails or queues, no row is lost (every key of the union is there),
# and per key the server holds the fastest row any process measured.
# Usage: pg_fleet_test.sh PRISM_BINARY PG_SERVER_SCRIPT SERVER_DIR (the fixture's running server)
set -euo pipefail
prism="$1" server="$2" sdir="$3"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
db=fleet_$$
url=$(bash "$server" createdb "$sdir" "$db")
"$prism" db init "$url" > /dev/null
export PRISM_TUNING_DB="$url" PRISM_TUNING_DB_LOCAL="$dir/local.db"

# Process i tunes rms_norm rows 4(i+1), 4(i+2), 4(i+3): neighbours share two keys; 10 keys in all.
pids=()
for i in 0 1 2 3 4 5 6 7; do
  printf 'shapes:\n  - {op: rms_norm, rows: [%d, %d, %d], d: 256}\n' $((4 * (i + 1))) $((4 * (i + 2))) \
    $((4 * (i + 3))) > "$dir/s$i.yaml"
  "$prism" pretune --shapes "$dir/s$i.yaml" --backends opencl,host --max-candidates 2 --min-runs 2 \
    --max-runs 3 --budget-s 120 --progress lines --json > "$dir/r$i.json" 2> "$dir/e$i.log" &
  pids+=($!)
done
errors=0
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    echo "pretune $i failed:" >&2
    cat "$dir/e$i.log" >&2
    errors=$((errors + 1))
  fi
done
[ "$errors" = 0 ] || fail "$errors of 8 pretune processes failed"
if grep -l "queued" "$dir"/e*.log; then fail "a pretune queued its results (the server was up)"; fi
[ ! -e "$dir/local.db" ] || fail "a pretune wrote the local file"

bash "$server" psql "$sdir" "$db" "SELECT shape, p50_ns FROM prism.results WHERE op = 'rms_norm'" > "$dir/server.txt"
python3 - "$dir" << 'PY'
import glob, json, sys
d = sys.argv[1]
best = {}
for f in sorted(glob.glob(d + "/r*.json")):
    for s in json.load(open(f))["shapes"]:
        if s["status"] not in ("tuned", "already_tuned"):
            sys.exit(f"FAIL: {f}: shape {s['shape']} is {s['status']}: {s.get('detail', '')}")
        best[s["shape"]] = min(best.get(s["shape"], float("inf")), s["p50_ns"])
server = {}
for line in open(d + "/server.txt"):
    shape, p50 = line.strip().split("|")
    server[shape] = float(p50)
want = {f"rows={4 * r},d=256" for r in range(1, 11)}
if set(best) != want:
    sys.exit(f"FAIL: the processes reported {sorted(best)}, expected {sorted(want)}")
if set(server) != want:
    sys.exit(f"FAIL: rows lost: the server holds {sorted(server)}, expected {sorted(want)}")
for shape, p50 in best.items():
    if server[shape] != p50:
        sys.exit(f"FAIL: {shape}: the server keeps {server[shape]} ns, the fastest measured was {p50} ns")
print(f"8 processes, {len(want)} keys, fastest row kept for each")
PY
"$prism" db check --db "$url" | grep -q "integrity: ok" || fail "db check"
echo "fleet pretune into PostgreSQL: ok"
