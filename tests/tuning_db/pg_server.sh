#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A throw-away PostgreSQL server (Debian `postgresql` package) for the tuning_db tests: its data
# directory and Unix socket live in DIR (under /tmp: a socket path must stay short), it listens
# on no TCP port, and the role `prism` logs in with the password `prism-test` (scram-sha-256).
# As root (CI) the server runs as `nobody`: initdb refuses root.
#   pg_server.sh start DIR     a new server in DIR (an old one there is stopped and removed)
#   pg_server.sh restart DIR   start the server of DIR again (after kill)
#   pg_server.sh kill DIR      stop it at once (-m immediate: as if it crashed)
#   pg_server.sh stop DIR      stop it and remove DIR
#   pg_server.sh url DIR [DB]  print the URL of database DB (default postgres)
#   pg_server.sh createdb DIR DB   create database DB and print its URL
#   pg_server.sh psql DIR DB SQL   run SQL as the superuser, unaligned output
set -euo pipefail
cmd=${1:?usage: pg_server.sh start|restart|kill|stop|url|createdb|psql DIR ...}
dir=${2:?pg_server.sh: DIR missing}
bin=$(ls -d /usr/lib/postgresql/*/bin 2> /dev/null | sort -V | tail -1)
[ -n "$bin" ] && [ -x "$bin/initdb" ] || {
  echo "pg_server.sh: no PostgreSQL server found (/usr/lib/postgresql/*/bin/initdb): install the Debian" \
    "package postgresql (scripts/install-deps.sh does)" >&2
  exit 1
}
password=prism-test
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}
url() { echo "postgresql://prism:$password@/${1:-postgres}?host=$dir"; }
pg_ctl_start() {
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
    -o "-k $dir -c listen_addresses= -F -c max_connections=60" start > /dev/null
}
case "$cmd" in
  start)
    if [ -f "$dir/data/postmaster.pid" ]; then as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop > /dev/null 2>&1 || true; fi
    rm -rf "$dir"
    mkdir -p "$dir"
    chmod 700 "$dir"
    [ "$(id -u)" -eq 0 ] && chown nobody "$dir"
    echo "$password" > "$dir/pwfile"
    [ "$(id -u)" -eq 0 ] && chown nobody "$dir/pwfile"
    as_owner "$bin/initdb" -D "$dir/data" -U prism --pwfile="$dir/pwfile" --auth=scram-sha-256 -E UTF8 \
      --no-sync > "$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    pg_ctl_start || { cat "$dir/server.log" >&2; exit 1; }
    url
    ;;
  restart) pg_ctl_start || { cat "$dir/server.log" >&2; exit 1; } ;;
  kill) as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop > /dev/null ;;
  stop)
    if [ -f "$dir/data/postmaster.pid" ]; then as_owner "$bin/pg_ctl" -D "$dir/data" -m fast stop > /dev/null || true; fi
    rm -rf "$dir"
    ;;
  url) url "${3:-}" ;;
  createdb)
    PGPASSWORD=$password "$bin/psql" -X -q -h "$dir" -U prism -d postgres -c "CREATE DATABASE \"$3\"" > /dev/null
    url "$3"
    ;;
  psql) PGPASSWORD=$password "$bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$dir" -U prism -d "$3" -c "$4" ;;
  *) echo "pg_server.sh: unknown command '$cmd' (start, restart, kill, stop, url, createdb, psql)" >&2; exit 2 ;;
esac
