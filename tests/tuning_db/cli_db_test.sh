#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
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

# --- The user's files (issue 15): every file of a folder, hashed, before and after. ---
state() { (cd "$1" && for f in $(ls -A | sort); do echo "$f $(cksum < "$f")"; done); }
# A copy of the .db file alone holds every imported row (the WAL was folded in at exit).
mkdir "$dir/copy"
"$prism" db import "$dir/in.json" --db "$dir/copy/c.db" >/dev/null
[ ! -e "$dir/copy/c.db-wal" ] || fail "import left a -wal behind"
cp "$dir/copy/c.db" "$dir/copy/copy.db"
"$prism" db list --db "$dir/copy/copy.db" | grep -q "^2 rows" || fail "a copy of the database is incomplete"
# Read-only commands create and change nothing, on a missing file or a prism one.
before=$(state "$dir/copy")
for cmd in list stats check export; do
  "$prism" db $cmd --db "$dir/copy/missing.db" >/dev/null 2>&1 || true
  "$prism" db $cmd --db "$dir/copy/c.db" >/dev/null 2>&1 || fail "db $cmd on a prism database"
done
"$prism" db show matmul f32 m=1,n=4096,k=4096 --db "$dir/copy/c.db" >/dev/null || fail "db show"
[ "$(state "$dir/copy")" = "$before" ] || fail "a read-only command created or changed a file"
# A file that is not a prism database is refused with one clear message and left byte-identical.
mkdir "$dir/user"
cp "$dir/out.json" "$dir/user/oops.json"
sqlite3 "$dir/user/other.db" "CREATE TABLE results (device TEXT, op TEXT, score REAL);
  INSERT INTO results VALUES ('aaaaaaaaaaaaaaaa', 'matmul', 1); CREATE TABLE people (name TEXT);"
before=$(state "$dir/user")
for f in oops.json other.db; do
  for cmd in "list" "stats" "export" "clear --yes" "vacuum" "import $dir/in.json" "merge $dir/a.db"; do
    if "$prism" db $cmd --db "$dir/user/$f" > "$dir/msg" 2>&1; then fail "db $cmd accepted $f"; fi
    grep -q "not an SQLite database\|not a prism tuning database" "$dir/msg" || { cat "$dir/msg"; fail "db $cmd on $f: message"; }
  done
  if "$prism" db merge "$dir/user/$f" --db "$dir/a.db" > "$dir/msg" 2>&1; then fail "merged $f"; fi
  if "$prism" db repair --db "$dir/user/$f" > "$dir/msg" 2>&1; then fail "repair moved $f"; fi
done
# Lookups from `prism run` (as from an app) leave them alone too, and still run on defaults.
for f in oops.json other.db; do
  PRISM_TUNING_DB="$dir/user/$f" "$prism" run add --shape n=16 > "$dir/msg" 2>&1 || { cat "$dir/msg"; fail "run with $f"; }
done
"$prism" run add --shape n=16 --db "$dir/user/none.db" > "$dir/msg" 2>&1 || { cat "$dir/msg"; fail "run with a new path"; }
[ "$(state "$dir/user")" = "$before" ] || fail "a foreign file was changed, renamed or joined by another"
# Merging a database without rows says so.
echo '{"format":"prism-tuning","version":1,"results":[]}' > "$dir/empty.json"
"$prism" db import "$dir/empty.json" --db "$dir/empty.db" > /dev/null
"$prism" db merge "$dir/empty.db" --db "$dir/a.db" 2>&1 | grep -q "warning: .*empty.db holds no tuned rows" || fail "merge of an empty database"
# --fingerprint is a prefix of hex digits, never a LIKE pattern.
"$prism" db import "$dir/in.json" --db "$dir/f.db" >/dev/null
if "$prism" db clear --fingerprint % --yes --db "$dir/f.db" 2>/dev/null; then fail "clear --fingerprint %"; fi
"$prism" db list --db "$dir/f.db" | grep -q "^2 rows" || fail "clear --fingerprint % deleted rows"
"$prism" db clear --fingerprint aaaa --yes --db "$dir/f.db" | grep -q "removed 2 rows" || fail "prefix clear"
# An empty --db is an error, not the default database.
if "$prism" db list --db "" 2>/dev/null; then fail "--db ''"; fi
echo "prism db: ok"
