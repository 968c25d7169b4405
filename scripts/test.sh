#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Everything CI runs: installs the Debian dependencies, builds, and runs every CTest test
# (GoogleTest suites, op suite, install/consumer example) with a per-test timeout.
# PRISM_TEST_JOBS (default 2) and PRISM_TEST_TIMEOUT (seconds, default 900) apply; extra
# arguments go to ctest (e.g. -L runtime). PRISM_SANITIZE=0 skips the sanitizer and fuzz runs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PRISM_BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
export PRISM_PYTHON=$(bash "$root/scripts/python-env.sh")  # transformers & co. for tests/llm/hf, tests/python
bash "$root/scripts/build.sh" -DPRISM_PYTHON=ON -DPython_EXECUTABLE="$PRISM_PYTHON"  # + the Python module
export PRISM_LLAMACPP_PYTHON=$(bash "$root/scripts/llamacpp-test-env.sh")  # llm.hf.perplexity's reference
# Tests must not read or write the user's tuning database: give them a fresh one.
export PRISM_TUNING_DB=${PRISM_TEST_TUNING_DB:-$build/ctest-tuning.db}
rm -f "$PRISM_TUNING_DB" "$PRISM_TUNING_DB-wal" "$PRISM_TUNING_DB-shm"
echo "test.sh: running ctest in $build"
# Every test runs once: a test that fails is a failure (no retries).
ctest --test-dir "$build" --output-on-failure -j "${PRISM_TEST_JOBS:-2}" --timeout "${PRISM_TEST_TIMEOUT:-900}" "$@"
# The Debian package: cpack, dpkg -i, an outside app built against it (scripts/test-package.sh).
bash "$root/scripts/test-package.sh"
# The whole suite again under ASan+UBSan (build/asan), then every fuzz harness for a bounded time.
[ "${PRISM_SANITIZE:-1}" = 0 ] || { bash "$root/scripts/test-sanitize.sh" && bash "$root/scripts/test-fuzz.sh"; }
