#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds prism with AddressSanitizer + UndefinedBehaviorSanitizer in its own tree (build/asan,
# clang 16, benchmarks off, the libFuzzer harnesses of fuzz/ on) and runs the whole CTest suite
# once in it. Leaks and errors inside PoCL/LLVM/the OpenCL ICD loader are suppressed by
# scripts/sanitizer/lsan.supp; prism's own frames never are. Prints how long the build and the
# run took. PRISM_ASAN_BUILD_DIR (default build/asan) and PRISM_TEST_JOBS (default 2) apply;
# extra arguments go to ctest.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PRISM_ASAN_BUILD_DIR:-$root/build/asan}
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# Coverage hooks for libFuzzer too, so that the fuzz harnesses link against these libraries.
flags="$san -fsanitize=fuzzer-no-link -O1 -g1"
start=$(date +%s)
CC=clang-16 CXX=clang++-16 PRISM_BUILD_DIR=$build bash "$root/scripts/build.sh" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="" \
  -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" \
  -DPRISM_BUILD_BENCHMARKS=OFF -DPRISM_BUILD_FUZZERS=ON
built=$(date +%s)
# Readable stacks when an llvm-symbolizer is installed.
sym=$(command -v llvm-symbolizer-16 || command -v llvm-symbolizer || true)
[ -z "$sym" ] || export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$sym}
# intercept_tls_get_addr=0: with it on, LeakSanitizer's tracer crashes on the dynamic TLS of the
# libraries PoCL dlopens ("Tracer caught signal 11"), a sanitizer fault, not a leak.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:detect_odr_violation=0:strict_string_checks=1:intercept_tls_get_addr=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/sanitizer/lsan.supp:print_suppressions=0}
# Programs the tests build themselves (the installed-consumer example) get the same sanitizers.
export CC=clang-16 CXX=clang++-16 CFLAGS="$san" CXXFLAGS="$san" LDFLAGS="$san"
export PRISM_TUNING_DB=$build/ctest-tuning.db
rm -f "$PRISM_TUNING_DB" "$PRISM_TUNING_DB-wal" "$PRISM_TUNING_DB-shm"
echo "test-sanitize: running ctest in $build"
rc=0
# examples.static_consumer is left to the plain run: under these flags it would build all of
# prism a third time (statically, with ASan) to check what the plain run already checks.
ctest --test-dir "$build" --output-on-failure -j "${PRISM_TEST_JOBS:-2}" --timeout "${PRISM_TEST_TIMEOUT:-1800}" \
  -E '^examples\.static_consumer$' "$@" || rc=$?
done_at=$(date +%s)
echo "test-sanitize: build $((built - start)) s, ctest $((done_at - built)) s"
exit $rc
