#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the build tree into a temporary prefix, then builds and runs examples/consumer against
# it twice: through find_package(prism CONFIG) and through pkg-config. Also runs the installed
# `prism` command. Usage: install_consumer.sh <build dir> <source dir> <work dir>
set -euo pipefail
build=$1 source=$2 work=$3
rm -rf "$work"
prefix="$work/prefix"
echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$work.install.log" 2>&1 || { cat "$work.install.log"; exit 1; }

launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
echo "== configure + build examples/consumer with find_package(prism)"
cmake -S "$source/examples/consumer" -B "$work/consumer" "${generator[@]}" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
cmake --build "$work/consumer"
echo "== run (CMake package)"
"$work/consumer/prism_consumer" | tee "$work/run_cmake.txt"
grep -q "results verified" "$work/run_cmake.txt"
# It must use the installed libraries, not the build tree's.
ldd "$work/consumer/prism_consumer" | grep prism_runtime | tee /dev/stderr | grep -q "$prefix"

echo "== build + run with pkg-config"
pcdir=$(dirname "$(find "$prefix" -name prism.pc | head -1)")
export PKG_CONFIG_PATH="$pcdir"
libdir=$(pkg-config --variable=libdir prism)
# CXX/CXXFLAGS/LDFLAGS as CMake reads them above (scripts/test-sanitize.sh sets them for ASan).
# shellcheck disable=SC2046,SC2086
"${CXX:-c++}" ${CXXFLAGS:-} -O1 -o "$work/consumer_pc" "$source/examples/consumer/main.cpp" $(pkg-config --cflags --libs prism) \
  -Wl,-rpath,"$libdir" ${LDFLAGS:-}
"$work/consumer_pc" | tee "$work/run_pc.txt"
grep -q "results verified" "$work/run_pc.txt"

echo "== installed prism command"
"$prefix/bin/prism" --version
"$prefix/bin/prism" devices
if [ -d "$source/vendors" ]; then
  test -d "$prefix/share/prism/vendors" || { echo "vendors/ was not installed into share/prism"; exit 1; }
  # The installed prism reads its data from the prefix (runtime/paths.cpp), not the source tree.
  "$prefix/bin/prism" vendors | tee "$work/vendors.txt"
  grep -q "$prefix/share/prism/vendors" "$work/vendors.txt" ||
    { echo "the installed prism does not read vendors/ from $prefix/share/prism"; exit 1; }
  # And the shipped shape sets that `prism pretune --model` names.
  "$prefix/bin/prism" pretune --list-models | tee "$work/models.txt"
  grep -q "prism-llm-demo" "$work/models.txt" ||
    { echo "the installed prism lists no prism-llm-demo shape set (share/prism/shapes)"; exit 1; }
fi
echo "install_consumer: OK"
