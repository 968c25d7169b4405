#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Configures and builds prism: Release, Ninja, ccache when present. Extra arguments go to the
# CMake configure step. PRISM_BUILD_DIR (default build/), PRISM_JOBS (default nproc) and
# PRISM_BUILD_TARGETS (space separated; default: all) apply.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PRISM_BUILD_DIR:-$root/build}
args=(-DCMAKE_BUILD_TYPE=Release)
# Keep an existing build tree's generator; new trees use Ninja when it is installed.
if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja > /dev/null; then args+=(-G Ninja); fi
if command -v ccache > /dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
echo "build.sh: configuring $build"
cmake -S "$root" -B "$build" "${args[@]}" "$@"
echo "build.sh: building with ${PRISM_JOBS:-$(nproc)} jobs"
targets=()
for t in ${PRISM_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "${PRISM_JOBS:-$(nproc)}" "${targets[@]}"
