#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every libFuzzer harness (build/asan/bin/fuzz_*, built by scripts/test-sanitize.sh) for
# PRISM_FUZZ_SECONDS (default 30) each, starting from its committed seeds in fuzz/corpus/<name>.
# New inputs go to a scratch folder, never into the repository. A crash, a leak, an
# uncaught exception or a timeout fails the script and leaves the input in $PRISM_FUZZ_ARTIFACTS
# (default build/asan/fuzz-artifacts).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PRISM_ASAN_BUILD_DIR:-$root/build/asan}
seconds=${PRISM_FUZZ_SECONDS:-30}
artifacts=${PRISM_FUZZ_ARTIFACTS:-$build/fuzz-artifacts}
# Readable stacks when an llvm-symbolizer is installed.
sym=$(command -v llvm-symbolizer-16 || command -v llvm-symbolizer || true)
[ -z "$sym" ] || export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$sym}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_odr_violation=0:intercept_tls_get_addr=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/sanitizer/lsan.supp:print_suppressions=0}
shopt -s nullglob
fuzzers=("$build"/bin/fuzz_*)
if [ ${#fuzzers[@]} -eq 0 ]; then
  echo "test-fuzz: no fuzz_* programs in $build/bin (run scripts/test-sanitize.sh first)" >&2
  exit 1
fi
mkdir -p "$artifacts"
failed=0
start=$(date +%s)
for fuzzer in "${fuzzers[@]}"; do
  name=${fuzzer##*/fuzz_}
  seeds=$root/fuzz/corpus/$name
  scratch=$(mktemp -d)
  if "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$artifacts/$name-" -print_final_stats=1 "$scratch" "$seeds" > "$artifacts/$name.log" 2>&1; then
    echo "test-fuzz: $name: ok, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$artifacts/$name.log" | grep -o '[0-9]*$') runs in ${seconds} s"
  else
    echo "test-fuzz: $name: FAILED (log and input in $artifacts)" >&2
    tail -40 "$artifacts/$name.log" >&2
    failed=1
  fi
  rm -rf "$scratch"
done
echo "test-fuzz: ${#fuzzers[@]} harnesses in $(($(date +%s) - start)) s"
exit $failed
