#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dispatch core's shape, checked on the sources (docs/architecture.md): each rule is a fact
# that once held the other way. A rule that fails names the files and lines that broke it.
# Usage: check_architecture.sh <source dir>
set -uo pipefail
cd "$1" || exit 2
failed=0
# rule NAME PATTERN PATHS... : no line of the C++ sources under PATHS may match PATTERN.
rule() {
  local name=$1 pattern=$2
  shift 2
  local hits
  hits=$(grep -rnE --include='*.cpp' --include='*.hpp' "$pattern" "$@" 2>/dev/null)
  if [ -n "$hits" ]; then
    printf 'FAIL %s:\n%s\n' "$name" "$hits"
    failed=1
  else
    printf 'ok   %s\n' "$name"
  fi
}
# count NAME EXPECTED PATTERN PATHS... : exactly EXPECTED lines match.
count() {
  local name=$1 expected=$2 pattern=$3
  shift 3
  local hits n
  hits=$(grep -rnE --include='*.cpp' --include='*.hpp' "$pattern" "$@" 2>/dev/null)
  n=$(printf '%s' "$hits" | grep -c . || true)
  if [ "$n" != "$expected" ]; then
    printf 'FAIL %s: %s definitions, expected %s:\n%s\n' "$name" "$n" "$expected" "$hits"
    failed=1
  else
    printf 'ok   %s\n' "$name"
  fi
}
backends='"(opencl|clblast|host)"'
rule "backend names are compared only in the registry and each backend's own folder" \
  "(==|!=) *$backends|$backends *(==|!=)|\"(opencl|clblast|host)\"\) *(\)|==)" \
  dispatch/dispatcher.cpp dispatch/config dispatch/tuner dispatch/log dispatch/tuning_tier.cpp cli kernels tuning_db runtime
rule "no op-name branches: GEMM ops are lowered by their descriptors" \
  "call\.op *(==|!=) *\"|is_gemm_family|name *== *\"(mm|bmm|addmm|linear|matmul)\"" \
  kernels dispatch
count "one shape_key class" 1 "^class shape_key\b" include runtime kernels tuning_db dispatch
count "one edit distance for every did-you-mean" 1 "^std::size_t edit_distance.*\{\$" runtime kernels tuning_db dispatch cli io
count "one implementation struct" 1 "^struct (op_)?implementation\b" include kernels dispatch
rule "no static-initialization hooks in the libraries" \
  "(const|static) bool [a-z_]+ = \[\] *\{|installed_at_load" runtime kernels tuning_db dispatch
rule "no process-wide switch of the tuning tier inside prism" \
  "set_tuning_lookup|uninstall_db_lookup" dispatch/tuner dispatch/backends cli
rule "vendor files are read by the vendor loader only" \
  "ifstream|fopen|data_dir\(\)" kernels dispatch/backends dispatch/tuner dispatch/dispatcher.cpp dispatch/tuning_tier.cpp
rule "layers import only downward: runtime" '#include "(kernels|tuning_db|dispatch|cli)/' runtime
rule "layers import only downward: kernels" '#include "(tuning_db|dispatch|cli)/' kernels
rule "layers import only downward: tuning_db" '#include "(kernels|dispatch|cli)/' tuning_db
rule "layers import only downward: dispatch" '#include "(cli|io)/' dispatch
rule "layers import only downward: io" '#include "(tuning_db|dispatch|cli)/' io
rule "the Python module uses only the public API" '#include "(runtime|kernels|tuning_db|dispatch|cli|io)/' python
# Every PRISM_ variable a program reads is one the settings parser knows: an unknown one draws
# "is not a variable prism reads; ignored" at start-up, which once named five of the benchmarks'
# own knobs (PRISM_BENCH_GRAPH, _PIPELINE, _MIN_TIME, ...) while they were read. Reads only:
# getenv, bench::env and env_number, not setenv / unsetenv (tests set unknown names on purpose).
known=$(grep -oE '"PRISM_[A-Z0-9_]+"' dispatch/config/env_settings.cpp | sort -u)
read_names=$(grep -rhoE --include='*.cpp' --include='*.hpp' '(^|[^A-Za-z0-9_])(getenv|env|env_number)\("PRISM_[A-Z0-9_]+"' \
  runtime kernels tuning_db dispatch cli io python benchmarks examples tests 2>/dev/null | grep -oE '"PRISM_[A-Z0-9_]+"' | sort -u)
unknown=$(comm -23 <(printf '%s\n' "$read_names") <(printf '%s\n' "$known"))
if [ -n "$read_names" ] && [ -z "$unknown" ]; then
  printf 'ok   %s\n' "every PRISM_ variable read is known to the settings parser"
else
  printf 'FAIL %s:\n%s\n' "every PRISM_ variable read is known to the settings parser (dispatch/config/env_settings.cpp)" \
    "${unknown:-no reads found}"
  failed=1
fi
[ "$failed" = 0 ] && echo "architecture: all rules hold"
exit "$failed"
