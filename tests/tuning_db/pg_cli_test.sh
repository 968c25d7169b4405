#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `prism db` against a PostgreSQL server: init, import, list/show/stats/check/export, merge,
# push and pull with a file; and the refusals (no schema, wrong password, newer schema, bad
# URL), each with a clear message and nothing written.
# Usage: pg_cli_test.sh PRISM_BINARY PG_SERVER_SCRIPT SERVER_DIR (the fixture's running server)
set -euo pipefail
prism="$1" server="$2" sdir="$3"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
db=cli_$$
url=$(bash "$server" createdb "$sdir" "$db")
q() { bash "$server" psql "$sdir" "$db" "$1"; }
export PRISM_TUNING_DB_LOCAL="$dir/local.db"
# Exit code 1 and a message matching $1.
refused() {
  local want="$1"
  shift
  if "$prism" "$@" > "$dir/msg" 2>&1; then fail "accepted: $*"; fi
  grep -qE -- "$want" "$dir/msg" || { cat "$dir/msg" >&2; fail "message of '$*' lacks /$want/"; }
}

cat > "$dir/in.json" << 'JSON'
{"format":"prism-tuning","version":1,
 "devices":[{"fingerprint":"aaaaaaaaaaaaaaaa","name":"GPU A","driver_version":"1.0"}],
 "results":[
  {"device":"aaaaaaaaaaaaaaaa","op":"matmul","dtype":"f32","shape":"m=1,n=4096,k=4096","backend":"clblast",
   "config":"KWG=16","p50_ns":12000,"default_ns":30000,"driver_version":"1.0"},
  {"device":"aaaaaaaaaaaaaaaa","op":"matmul","dtype":"f32","shape":"m=16,n=4096,k=4096","backend":"opencl",
   "config":"wg=64","p50_ns":22000,"default_ns":33000,"driver_version":"1.0"}]}
JSON

# --- No schema yet: every command says how to create it; nothing is created implicitly.
refused "no prism schema .*prism db init" db list --db "$url"
refused "no prism schema" db import "$dir/in.json" --db "$url"
[ "$(q "SELECT to_regnamespace('prism') IS NULL")" = t ] || fail "a refused import created the schema"
[ ! -e "$dir/local.db" ] || fail "a refused import wrote the local file"

"$prism" db init "$url" | grep -q "created prism's schema v2" || fail "init"
"$prism" db init "$url" | grep -q "already holds prism's schema v2" || fail "init again"
[ "$(q "SELECT value FROM prism.meta WHERE key = 'schema_version'")" = 2 ] || fail "schema version"

# --- The commands against the server, as against a file.
"$prism" db import "$dir/in.json" --db "$url" | grep -q "2 new" || fail "import"
"$prism" db list --db "$url" | grep -q "m=16,n=4096,k=4096  opencl" || fail "list"
"$prism" db list --db "$url" --json | grep -q '"speedup": 2.5' || fail "list --json"
"$prism" db show matmul f32 k=4096,n=4096,m=1 --db "$url" | grep -q "winner: clblast KWG=16" || fail "show"
"$prism" db stats --db "$url" | grep -q "GPU A .* matmul .* 2 .* 1.94x" || fail "stats"
"$prism" db check --db "$url" | grep -q "integrity: ok" || fail "check"
"$prism" db export "$dir/out.json" --db "$url" --op matmul 2> /dev/null
grep -q '"config": "KWG=16"' "$dir/out.json" || fail "export"
# PRISM_TUNING_DB may be the URL; the password never shows.
PRISM_TUNING_DB="$url" "$prism" db list | grep -q "^database: postgresql://prism:\*\*\*@" || fail "PRISM_TUNING_DB=URL"
if PRISM_TUNING_DB="$url" "$prism" db list | grep -q prism-test; then fail "the password was printed"; fi
# Merge a file into the server: the faster row per key.
sed 's/"p50_ns":12000/"p50_ns":9000/; s/KWG=16/KWG=32/' "$dir/in.json" > "$dir/faster.json"
"$prism" db import "$dir/faster.json" --db "$dir/b.db" > /dev/null
"$prism" db merge "$dir/b.db" --db "$url" | grep -q "1 replaced (faster), 1 kept" || fail "merge file into server"
"$prism" db show matmul f32 m=1,n=4096,k=4096 --db "$url" | grep -q "KWG=32" || fail "merge result"
# Merge the server into a file.
"$prism" db merge "$url" --db "$dir/c.db" | grep -q "2 new" || fail "merge server into file"

# --- push and pull.
sed 's/"p50_ns":22000/"p50_ns":11000/; s/wg=64/wg=128/' "$dir/in.json" > "$dir/push.json"
"$prism" db import "$dir/push.json" --db "$dir/local.db" > /dev/null
"$prism" db push "$url" | grep -q "pushed $dir/local.db to .*1 replaced (faster), 1 kept" || fail "push (local file)"
[ "$(q "SELECT config FROM prism.results WHERE shape = 'm=16,n=4096,k=4096'")" = wg=128 ] || fail "push result"
"$prism" db pull "$url" --db "$dir/pulled.db" | grep -q "2 new" || fail "pull"
"$prism" db list --db "$dir/pulled.db" | grep -q "^2 rows" || fail "pulled rows"
"$prism" db pull "$url" --db "$dir/pulled-b.db" --fingerprint bbbb | grep -q "0 new" || fail "pull --fingerprint"
refused "is not a server: give a postgresql:// or postgres:// URL" db push "$dir/b.db"
refused "must name a local SQLite file" db pull "$url" --db "$url"
refused "repair moves a damaged SQLite file aside" db repair --db "$url"

# --- Refusals: each a clear message, exit 1, nothing written.
rows=$(q "SELECT count(*) FROM prism.results")
bad_pw=${url/prism-test/wrong}
refused "refused the login: .*password authentication failed" db list --db "$bad_pw"
refused "refused the login" db import "$dir/faster.json" --db "$bad_pw"
refused "refused the login" db push "$bad_pw" --db "$dir/b.db"
if grep -q wrong "$dir/msg"; then fail "the password was printed"; fi
q "UPDATE prism.meta SET value = '99' WHERE key = 'schema_version'"
refused "newer prism \(schema v99, this prism uses v2\); upgrade prism" db list --db "$url"
refused "newer prism" db import "$dir/push.json" --db "$url" --replace
refused "newer prism" db init "$url"
[ "$(q "SELECT count(*) FROM prism.results")" = "$rows" ] || fail "a refused command wrote rows"
[ "$(q "SELECT value FROM prism.meta WHERE key = 'schema_version'")" = 99 ] || fail "init touched a newer schema"
refused "unknown tuning database scheme 'mysql://'.*valid: an SQLite file path, or a postgresql:// or postgres:// URL" \
  db list --db mysql://host/db
if "$prism" db list --db "postgresql://u@[::1/db" > "$dir/msg" 2>&1; then fail "accepted a malformed URL"; fi
grep -q "malformed PostgreSQL URL" "$dir/msg" || { cat "$dir/msg" >&2; fail "malformed URL message"; }
q "UPDATE prism.meta SET value = '2' WHERE key = 'schema_version'"
"$prism" db clear --yes --db "$url" | grep -q "removed 2 rows" || fail "clear"
"$prism" db vacuum --db "$url" > /dev/null || fail "vacuum"
echo "prism db against PostgreSQL: ok"
