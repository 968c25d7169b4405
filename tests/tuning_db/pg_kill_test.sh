#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The server is killed in the middle of a pretune: pretune finishes anyway (one warning), its
# results wait in the local file, and after the server is back `prism db push` brings them:
# every key the pretune measured is on the server with the time it reported, and the server
# and the local file pass their checks.
# Usage: pg_kill_test.sh PRISM_BINARY PG_SERVER_SCRIPT SERVER_DIR (a server of its own: it is
# started here and stopped on exit, also on failure)
set -euo pipefail
prism="$1" server="$2" sdir="$3"
dir=$(mktemp -d)
cleanup() {
  bash "$server" stop "$sdir" || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
bash "$server" start "$sdir" > /dev/null
url=$(bash "$server" createdb "$sdir" killed)
q() { bash "$server" psql "$sdir" killed "$1"; }
"$prism" db init "$url" > /dev/null
export PRISM_TUNING_DB="$url" PRISM_TUNING_DB_LOCAL="$dir/local.db" PRISM_TUNING_DB_TIMEOUT=2

# 100 shapes, each a few tens of milliseconds (no new kernel to compile after the first): the
# kill lands while most are still to come.
shapes=100
rows=$(seq -s, 4 4 $((4 * shapes)))
printf 'shapes:\n  - {op: rms_norm, rows: [%s], d: 256}\n' "$rows" > "$dir/s.yaml"
"$prism" pretune --shapes "$dir/s.yaml" --backends opencl,host --max-candidates 2 --min-runs 3 --max-runs 5 \
  --budget-s 200 --progress lines --json > "$dir/report.json" 2> "$dir/err.log" &
pid=$!
# Kill the server once the first two rows are in.
for _ in $(seq 1 3000); do
  n=$(q "SELECT count(*) FROM prism.results" 2> /dev/null || echo 0)
  [ "$n" -ge 2 ] && break
  kill -0 $pid 2> /dev/null || break
  sleep 0.02
done
kill -0 $pid 2> /dev/null || { cat "$dir/err.log" >&2; fail "pretune ended before the server was killed"; }
bash "$server" kill "$sdir"
before_kill=$n
wait $pid || { cat "$dir/err.log" >&2; fail "pretune failed when the server went away"; }
[ "$(grep -c "tuning database .*queued there" "$dir/err.log")" = 1 ] || { cat "$dir/err.log" >&2; fail "not one warning"; }
grep -q "results were queued in $dir/local.db; send them with \`prism db push postgresql://prism:\*\*\*@" \
  "$dir/err.log" || { cat "$dir/err.log" >&2; fail "pretune did not say where its results wait"; }
queued=$("$prism" db list --db "$dir/local.db" | sed -n 's/^\([0-9]*\) rows$/\1/p')
[ "$queued" -ge 1 ] || fail "nothing was queued in the local file"

# While the server is down, lookups and `prism db` say so, once, and do not hang.
if "$prism" db list --db "$url" > "$dir/msg" 2>&1; then fail "db list on a dead server succeeded"; fi
grep -q "cannot reach the server" "$dir/msg" || { cat "$dir/msg" >&2; fail "db list message"; }

bash "$server" restart "$sdir"
"$prism" db push "$url" --db "$dir/local.db" | tee "$dir/push.txt" | grep -q "pushed" || fail "push"
python3 - "$dir/report.json" "$(q "SELECT string_agg(shape || '=' || p50_ns, ';') FROM prism.results")" "$shapes" << 'PY'
import json, sys
report = json.load(open(sys.argv[1]))
server = dict(kv.rsplit("=", 1) for kv in sys.argv[2].split(";"))
tuned = {s["shape"]: s["p50_ns"] for s in report["shapes"] if s["status"] == "tuned"}
if len(tuned) != int(sys.argv[3]):
    sys.exit(f"FAIL: pretune tuned {len(tuned)} of {sys.argv[3]} shapes: " + str([s["status"] for s in report["shapes"]]))
missing = sorted(set(tuned) - set(server))
if missing:
    sys.exit(f"FAIL: rows lost: {missing}")
for shape, p50 in tuned.items():
    if float(server[shape]) != p50:
        sys.exit(f"FAIL: {shape}: the server holds {server[shape]} ns, pretune measured {p50} ns")
print(f"{len(tuned)} rows on the server after the push")
PY
[ "$before_kill" -lt "$shapes" ] || fail "the server was killed after the last row"
"$prism" db check --db "$url" | grep -q "integrity: ok" || fail "server check"
"$prism" db check --db "$dir/local.db" | grep -q "integrity: ok" || fail "local file check"
# Pushing again changes nothing.
"$prism" db push "$url" --db "$dir/local.db" | grep -q " 0 new, 0 replaced" || fail "a second push changed rows"
echo "server killed during pretune, rows pushed afterwards: ok"
