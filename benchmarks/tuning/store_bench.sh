#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs prism_bench_tuning_store against a throw-away PostgreSQL server (the tests' pg_server.sh:
# Debian `postgresql`, a temporary directory, a Unix socket), stopped on exit. Extra arguments
# go to the benchmark (e.g. --rows 100000 --benchmark_repetitions=3).
# PRISM_BUILD_DIR (default build/) applies.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${PRISM_BUILD_DIR:-$root/build}
server=$root/tests/tuning_db/pg_server.sh
dir=/tmp/prism-pg-bench-$$
trap 'bash "$server" stop "$dir"' EXIT
bash "$server" start "$dir" > /dev/null
PRISM_BENCH_PG_URL=$(bash "$server" createdb "$dir" bench) "$build/bin/prism_bench_tuning_store" "$@"
