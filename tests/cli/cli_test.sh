#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The `prism` command as scripts and people use it. One part per ctest test:
#   exit_codes  0 ok, 1 runtime error, 2 usage (with did-you-mean), 3 a failed check
#   json        every --json output validates against its schema (tests/cli/schemas)
#   widths      tables and the pretune bar fit 80 columns off a terminal, and $COLUMNS
#   log         a log file from several processes at once; summarize; replay of every line type
# usage: cli_test.sh PART PRISM_BINARY SOURCE_DIR WORK_DIR
set -euo pipefail
part=$1 prism=$2 src=$3 work=$4
here=$src/tests/cli
rm -rf "$work" && mkdir -p "$work"
unset COLUMNS PRISM_LOG_DISPATCH PRISM_LOG_DISPATCH_FILE PRISM_LOG_DISPATCH_FILTER
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE CMD...: runs CMD, requires exit code CODE; its stdout+stderr are in $work/out.
expect() {
  local want=$1 got=0
  shift
  "$@" > "$work/out" 2>&1 || got=$?
  [ "$got" = "$want" ] || { cat "$work/out"; fail "'$*' exited $got, expected $want"; }
}

# A vendor profile whose add kernel is wrong: `prism run add` then fails its host check.
broken_vendor() {
  mkdir -p "$work/vendors/broken/kernels"
  printf 'name: broken\npriority: 100\nmatch:\n  device_type: [cpu, gpu, accelerator]\n' \
    > "$work/vendors/broken/vendor.yaml"
  sed 's/#define EW_BODY return x + (T)(alpha) \* y;/#define EW_BODY return x + (T)(alpha) * y + (T)(1000.0f);/' \
    "$src/kernels/cl/elementwise.cl" > "$work/vendors/broken/kernels/elementwise.cl"
  cmp -s "$src/kernels/cl/elementwise.cl" "$work/vendors/broken/kernels/elementwise.cl" &&
    fail "add's kernel body changed; update broken_vendor in this test"
  echo "$work/vendors"
}

case $part in
exit_codes)
  expect 0 "$prism" run add --shape n=64 --repeat 0
  expect 0 "$prism" --version
  grep -Eq '^prism [0-9]+\.[0-9]+\.[0-9]+ \(git ([0-9a-f]{12}(-dirty)?|unknown), [a-z]+ build' "$work/out" ||
    { cat "$work/out"; fail "--version lacks version, git hash or build type"; }
  grep -q 'CLBlast [0-9]' "$work/out" || fail "--version lacks the CLBlast version"
  expect 2 "$prism"
  expect 2 "$prism" rnu add
  grep -q "unknown command 'rnu' (did you mean 'run'?)" "$work/out" || { cat "$work/out"; fail "no suggestion for rnu"; }
  expect 2 "$prism" log sumarize x.csv
  grep -q "did you mean 'summarize'" "$work/out" || { cat "$work/out"; fail "no suggestion for sumarize"; }
  expect 2 "$prism" run add --shap n=64
  grep -q "unknown flag '--shap' (did you mean '--shape'?)" "$work/out" || { cat "$work/out"; fail "no flag suggestion"; }
  expect 2 "$prism" devices --jsn
  grep -q "did you mean '--json'" "$work/out" || { cat "$work/out"; fail "no suggestion for --jsn"; }
  expect 2 "$prism" run add --shape n=64 --repeat -1
  expect 2 "$prism" run no_such_op --shape n=64
  expect 2 "$prism" pretune
  printf 'prism_dispatch_header,v7,event\n' > "$work/v7.csv"
  expect 1 "$prism" log summarize "$work/v7.csv"
  grep -q "v7" "$work/out" || fail "the error does not name the version"
  PRISM_VENDOR_PATH=$(broken_vendor) expect 3 "$prism" run add --shape n=64 --repeat 0
  grep -q "check: *FAIL" "$work/out" || { cat "$work/out"; fail "no FAIL line"; }
  # --no-check times the same wrong kernel without the host reference: exit 0, and says so.
  PRISM_VENDOR_PATH=$(broken_vendor) expect 0 "$prism" run add --shape n=64 --repeat 1 --no-check
  grep -q "check: *skipped (--no-check)" "$work/out" || { cat "$work/out"; fail "--no-check did not skip the check"; }
  grep -Eq "^pipelined: [0-9.]+ us per call over 1 calls back to back" "$work/out" || { cat "$work/out"; fail "no pipelined time"; }
  expect 2 "$prism" run add --shape n=64 --no-check --dry-run
  echo "exit_codes: 0, 1, 2 and 3 where documented"
  ;;

json)
  check() {  # check SCHEMA CMD...: stdout of CMD (exit 0) validates against SCHEMA
    local schema=$1
    shift
    "$@" > "$work/doc.json" 2> "$work/err" || { cat "$work/err"; fail "'$*' failed"; }
    python3 "$here/check_json.py" "$here/schemas/$schema.schema.json" "$*" < "$work/doc.json"
  }
  check devices "$prism" devices --json
  check routes "$prism" routes --json
  check vendors "$prism" vendors --json
  check ops "$prism" ops --json
  check op "$prism" ops mm --json
  check version "$prism" version --json
  check models "$prism" pretune --list-models --json
  printf 'model: json-test\nshapes:\n  - {op: add, dtype: f32, n: 4096}\n  - {op: relu, dtype: f32, n: 4096}\n' \
    > "$work/shapes.yaml"
  check pretune "$prism" pretune --db "$work/t.db" --shapes "$work/shapes.yaml" --ops add --strategy random \
    --max-candidates 1 --min-runs 1 --max-runs 2 --json
  check db_list "$prism" db list --db "$work/t.db" --json
  check db_stats "$prism" db stats --db "$work/t.db" --json
  check db_check "$prism" db check --db "$work/t.db" --json
  check db_show "$prism" db show --db "$work/t.db" add f32 n=4096 --json
  check run "$prism" run add --shape n=64 --repeat 2 --json
  check run "$prism" run mm --shape m=8,n=8,k=8 --dry-run --json
  PRISM_LOG_DISPATCH=profile,dispatch PRISM_LOG_DISPATCH_FILE=$work/log.csv \
    "$prism" run add --shape n=64 --repeat 1 > /dev/null
  check log_summary "$prism" log summarize "$work/log.csv" --json
  check log_replay "$prism" log replay "$work/log.csv" --json --repeat 0
  # A document that breaks its schema is caught (the check can fail).
  echo '{"lines": -1}' | python3 "$here/check_json.py" "$here/schemas/log_summary.schema.json" bad > /dev/null &&
    fail "check_json.py accepted a bad document"
  echo "json: every document valid"
  ;;

widths)
  # longest LIMIT FILE: fails naming the first line longer than LIMIT columns.
  # Lines holding only a path are exempt: paths are printed whole.
  longest() {
    awk -v limit="$1" -v name="$3" '!/^ *\/[^ ]*$/ && length($0) > limit { printf "FAIL: %s: line %d has %d columns (> %d): %s\n", name, NR, length($0), limit, $0; bad = 1; exit } END { exit bad }' "$2"
  }
  width_of() {  # width_of LIMIT CMD...: stdout of CMD, not a terminal
    local limit=$1
    shift
    "$@" > "$work/w.txt" 2> "$work/w.err" || { cat "$work/w.err"; fail "'$*' failed"; }
    [ -s "$work/w.txt" ] || fail "'$*' printed nothing"
    longest "$limit" "$work/w.txt" "$*"
  }
  # A database with a row whose config is long (the widest column of `db list`).
  printf 'model: w\nshapes:\n  - {op: mm, dtype: f32, m: 64, n: 64, k: 64}\n' > "$work/w.yaml"
  "$prism" pretune --db "$work/t.db" --shapes "$work/w.yaml" --backends opencl --max-candidates 1 --min-runs 1 \
    --max-runs 2 > /dev/null 2>&1 || fail "pretune for the width test failed"
  for cols in "" 60; do
    limit=${cols:-80}
    export COLUMNS=$cols
    [ -z "$cols" ] && unset COLUMNS
    width_of "$limit" "$prism" devices
    width_of "$limit" "$prism" routes
    width_of "$limit" "$prism" vendors
    width_of "$limit" "$prism" ops
    width_of "$limit" "$prism" ops scaled_dot_product_attention
    # Relative: the header line names the database file as given.
    (cd "$work" && width_of "$limit" "$prism" db list --db t.db)
    (cd "$work" && width_of "$limit" "$prism" db stats --db t.db)
  done
  unset COLUMNS
  # pretune: the compact summary (one line for the shapes the budget left), fitting 80 columns.
  "$prism" pretune --db "$work/t.db" --model prism-llm-demo --ops linear --budget-s 0.001 --max-candidates 1 \
    --min-runs 1 --max-runs 1 > "$work/p.txt" 2> "$work/p.err" || { cat "$work/p.err"; fail "pretune failed"; }
  longest 80 "$work/p.txt" "pretune summary"
  grep -q "not tuned" "$work/p.txt" || { cat "$work/p.txt"; fail "no line for the shapes left"; }
  [ "$(grep -c 'not tuned' "$work/p.txt")" = 1 ] || { cat "$work/p.txt"; fail "one line per shape left"; }
  # The bar on a terminal (a pty from script(1)), 80 columns: every redraw fits.
  if command -v script > /dev/null; then
    printf 'model: bar\nshapes:\n  - {op: add, dtype: f32, n: 4096}\n  - {op: relu, dtype: f32, n: 4096}\n' \
      > "$work/bar.yaml"
    # An empty PoCL kernel cache, so that the kernels build here: nothing the compiler says may
    # reach the terminal between the redraws.
    COLUMNS=80 POCL_CACHE_DIR=$work/pocl-cache script -qec "$prism pretune --db $work/bar.db \
      --shapes $work/bar.yaml --progress bar --max-candidates 1 --min-runs 1 --max-runs 2 2>&1" /dev/null \
      > "$work/bar.raw" 2>&1 || true
    # Each redraw starts with CR; drop the erase-line sequence and check each piece.
    tr '\r' '\n' < "$work/bar.raw" | sed 's/\x1b\[K//g' > "$work/bar.txt"
    grep -q '^\[[#.]*\] ' "$work/bar.txt" || { cat "$work/bar.txt"; fail "no progress bar drawn on a terminal"; }
    grep '^\[[#.]*\] ' "$work/bar.txt" > "$work/bars.txt"
    longest 80 "$work/bars.txt" "pretune progress bar"
  fi
  echo "widths: every line fits"
  ;;

log)
  log=$work/dispatch.csv
  # Four processes append to one file at once.
  for i in 1 2 3 4; do
    PRISM_LOG_DISPATCH=1 PRISM_LOG_DISPATCH_FILE=$log "$prism" run add --shape n=$((i * 64)) --repeat 5 \
      > "$work/p$i.out" 2> "$work/p$i.err" &
  done
  wait
  [ "$(grep -c '^prism_dispatch_header,' "$log")" = 1 ] || { cat "$log"; fail "not exactly one header"; }
  grep -q 'dispatch summary' "$log" && fail "the exit summary went into the CSV file"
  grep -q 'prism dispatch summary' "$work/p1.err" || { cat "$work/p1.err"; fail "no exit summary on stderr"; }
  "$prism" log summarize "$log" > "$work/sum.txt"
  # Each process: the checked call, 5 timed alone, 5 back to back.
  grep -Eq '^add +opencl +[a-z-]+ +44 ' "$work/sum.txt" || { cat "$work/sum.txt"; fail "4 x 11 calls of add"; }
  grep -q 'processes: 4' "$work/sum.txt" || { cat "$work/sum.txt"; fail "not 4 processes"; }
  # A filter that matches nothing still writes the header.
  PRISM_LOG_DISPATCH=1 PRISM_LOG_DISPATCH_FILTER=',no_such_op,' PRISM_LOG_DISPATCH_FILE=$work/empty.csv \
    "$prism" run add --shape n=64 --repeat 0 > /dev/null 2>&1
  [ "$(cat "$work/empty.csv")" = "$(head -1 "$log")" ] || fail "no header in a filtered-out log"

  # Every line type: exec (default route and fallback), reject, error (strict), db-nearest, v1.
  all=$work/all.csv
  PRISM_LOG_DISPATCH=dispatch PRISM_LOG_DISPATCH_FILE=$all "$prism" run add --shape n=100 --repeat 0 > /dev/null 2>&1
  PRISM_LOG_DISPATCH=dispatch PRISM_LOG_DISPATCH_FILE=$all PRISM_OP_mm=clblast \
    "$prism" run mm --shape m=4,n=4,k=4 --dtype bf16 --repeat 0 > /dev/null 2>&1
  PRISM_LOG_DISPATCH=dispatch PRISM_LOG_DISPATCH_FILE=$all PRISM_OP_mm=clblast PRISM_STRICT_ROUTES=1 \
    "$prism" run mm --shape m=4,n=4,k=4 --dtype bf16 --repeat 0 > /dev/null 2>&1 || true
  printf 'model: near\nshapes:\n  - {op: relu, dtype: f32, n: 4096}\n' > "$work/near.yaml"
  "$prism" pretune --db "$work/near.db" --shapes "$work/near.yaml" --max-candidates 1 --min-runs 1 --max-runs 2 > /dev/null 2>&1
  PRISM_LOG_DISPATCH=1 PRISM_LOG_DISPATCH_FILE=$all "$prism" --db "$work/near.db" run relu --shape n=4000 --repeat 0 \
    > /dev/null 2>&1
  for event in exec reject error; do
    grep -q "^prism_dispatch,v2,$event," "$all" || { cat "$all"; fail "no $event line to replay"; }
  done
  grep -q ',db-nearest,n=4096,' "$all" || { cat "$all"; fail "no db-nearest line naming its row n=4096"; }
  expect 0 "$prism" log replay "$all" --repeat 0
  grep -Eq 'replayed [0-9]+ of [0-9]+ lines: [1-9][0-9]* passed, 0 failed the check, 0 errors, [1-9][0-9]* refused again' \
    "$work/out" || { cat "$work/out"; fail "replay summary"; }
  # prism 0.1's v1 lines replay too, from a file and through `prism run --replay`.
  printf '%s\n%s\n' 'prism_dispatch_header,v1,event,op,dtypes,shape,device,backend,config,tier,reason,time_us,attrs' \
    'prism_dispatch,v1,exec,addmm,f32|f32|f32,"m=9,n=10,k=11",0,host,,default,,,alpha=0.5;beta=2.0' > "$work/v1.csv"
  expect 0 "$prism" log replay "$work/v1.csv" --repeat 0
  grep -q '1 passed' "$work/out" || { cat "$work/out"; fail "v1 file replay"; }
  expect 0 "$prism" run --repeat 0 --replay "$(grep -E '^prism_dispatch,v2,exec,[^,]*,[0-9]+,add,' "$all" | head -1)"
  # A check that fails on replay exits 3.
  { head -1 "$all"; grep -E '^prism_dispatch,v2,exec,[^,]*,[0-9]+,add,[^,]*,[^,]*,[^,]*,opencl,' "$all" | head -1; } \
    > "$work/add.csv"
  [ "$(wc -l < "$work/add.csv")" = 2 ] || { cat "$all"; fail "no opencl add line"; }
  PRISM_VENDOR_PATH=$(broken_vendor) expect 3 "$prism" log replay "$work/add.csv" --repeat 0
  grep -q '1 failed the check' "$work/out" || { cat "$work/out"; fail "the failed check is not counted"; }
  echo "log: appends, summary and replay OK"
  ;;
*)
  fail "unknown part '$part'"
  ;;
esac
