#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds prism as static libraries (BUILD_SHARED_LIBS=OFF) with the consumer example, tunes one
# shape into a fresh database with that build's `prism pretune`, and runs the statically linked
# consumer: its ops::add call must be routed from the database (db-exact). A static link keeps
# only the objects something references, so this catches a tuning tier that hangs on a static
# initializer. Usage: static_consumer.sh <source dir> <work dir>
set -euo pipefail
source=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# Paths relative to the source tree in ccache's hashes: python.package's wheel build, as deep in
# the build directory, then finds this build's objects (and a later clone elsewhere finds both).
export CCACHE_BASEDIR=$source
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
echo "== configure a static build"
cmake -S "$source" -B "$work/build" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DPRISM_BUILD_TESTS=OFF -DPRISM_BUILD_BENCHMARKS=OFF -DPRISM_BUILD_EXAMPLES=ON \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
echo "== build prism (libraries, CLI, examples)"
cmake --build "$work/build" -j "${PRISM_JOBS:-2}" > "$work/build.log" 2>&1 || { tail -50 "$work/build.log"; exit 1; }
bin="$work/build/bin"
if ldd "$bin/prism_consumer" | grep -q libprism_; then
  echo "prism_consumer links prism's shared libraries; expected a static link"; exit 1
fi
export PRISM_TUNING_DB="$work/tuning.db"
printf 'name: static-consumer\nshapes:\n  - {op: add, dtype: f32, n: 4096}\n' > "$work/shapes.yaml"
echo "== pretune the consumer's add into $PRISM_TUNING_DB"
"$bin/prism" pretune --shapes "$work/shapes.yaml" --backends opencl,host --max-candidates 1 --min-runs 1 \
  --max-runs 2 2>&1 | tail -5
echo "== run the static consumer with the dispatch log"
PRISM_LOG_DISPATCH=1 "$bin/prism_consumer" > "$work/run.txt" 2>&1 || { cat "$work/run.txt"; exit 1; }
cat "$work/run.txt"
grep -q "ops::add over 4096 floats: results verified" "$work/run.txt"
grep -E "^prism_dispatch,v[0-9]+,exec,(.*,)?add,f32.*,db-exact," "$work/run.txt" > /dev/null ||
  { echo "static_consumer: the add call was not routed from the tuning database (no db-exact line)"; exit 1; }

# The installed static package must find its own dependencies (find_dependency in prismConfig):
# an outside app that asks only for find_package(prism) builds and links.
echo "== install the static build and build examples/consumer against it with find_package(prism)"
cmake --install "$work/build" --prefix "$work/prefix" > "$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
cmake -S "$source/examples/consumer" -B "$work/outside" "${generator[@]}" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/outside.log" 2>&1 &&
  cmake --build "$work/outside" >> "$work/outside.log" 2>&1 || { tail -40 "$work/outside.log"; exit 1; }
PRISM_LOG_DISPATCH=1 "$work/outside/prism_consumer" > "$work/outside.txt" 2>&1 || { cat "$work/outside.txt"; exit 1; }
grep -q "ops::add over 4096 floats: results verified" "$work/outside.txt"
grep -E "^prism_dispatch,v[0-9]+,exec,(.*,)?add,f32.*,db-exact," "$work/outside.txt" > /dev/null ||
  { echo "static_consumer: the installed static package lost the database tier"; exit 1; }
echo "static_consumer: OK (db-exact in a static build, in-tree and installed)"
