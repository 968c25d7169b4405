#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds prism's Debian package from a build tree (CPack), installs it with dpkg -i, then builds
# and runs examples/consumer against the installed package the way an outside project would: a
# plain CMake project that does not ask for C++20 (the exported targets must carry it), found
# without CMAKE_PREFIX_PATH. Checks the installed commands, SONAME and licence files, then removes
# the package again. Needs root (or sudo); skips with a message where neither is available.
# PRISM_BUILD_DIR (default build/) applies.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PRISM_BUILD_DIR:-$root/build}
work=$build/package-test
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2> /dev/null; then sudo="sudo -n"; else
    echo "test-package: skipped: dpkg -i needs root or password-less sudo"
    exit 0
  fi
fi
if dpkg-query -W -f='${Status}' prism 2> /dev/null | grep -q 'install ok installed'; then
  # In CI it can only be the leftover of an interrupted run; on a developer's machine it may be
  # theirs.
  if [ "${CI:-}" != true ]; then
    echo "test-package: a prism package is installed already; not touching it"
    exit 1
  fi
  $sudo dpkg --purge prism
fi
rm -rf "$work" && mkdir -p "$work"

echo "== cpack -G DEB"
(cd "$build" && cpack -G DEB -B "$work/cpack" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(find "$work/cpack" -maxdepth 1 -name 'prism_*.deb' | head -1)
[ -n "$deb" ] || { cat "$work/cpack.log"; echo "test-package: no .deb produced"; exit 1; }
dpkg-deb --field "$deb" Package Version Depends
# The PostgreSQL tuning store links libpq: dpkg-shlibdeps must have named it.
dpkg-deb --field "$deb" Depends | grep -q 'libpq5' || { echo "test-package: the package does not depend on libpq5"; exit 1; }

cleanup() { $sudo dpkg --purge prism > /dev/null 2>&1 || true; }
trap cleanup EXIT
echo "== dpkg -i $(basename "$deb")"
$sudo dpkg -i "$deb"

echo "== installed files"
version=$(dpkg-query -W -f='${Version}' prism)
lib=$(dpkg -L prism | grep -E '/libprism_runtime\.so\.[0-9]' | head -1)
[ -n "$lib" ] || { echo "no versioned libprism_runtime.so in the package"; exit 1; }
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
major=${version%%.*} rest=${version#*.}
minor=${rest%%.*}
want="libprism_runtime.so.$major"
[ "$major" = 0 ] && want="libprism_runtime.so.0.$minor"
echo "SONAME $soname (package $version)"
[ "$soname" = "$want" ] || { echo "SONAME $soname does not follow version $version (expected $want)"; exit 1; }
dpkg -L prism | grep -q '/usr/share/doc/prism/LICENSE$' || { echo "LICENSE not installed"; exit 1; }
/usr/bin/prism --version
/usr/bin/prism --version | grep -q "^prism $version " || { echo "prism --version does not say $version"; exit 1; }
/usr/bin/prism-llm --version | grep -q "^prism-llm $version " || { echo "prism-llm --version does not say $version"; exit 1; }
# The package's data: the vendor profiles and the shape sets that the main job's pretune names.
/usr/bin/prism vendors | grep -q /usr/share/prism/vendors || { echo "prism does not read /usr/share/prism/vendors"; exit 1; }
/usr/bin/prism pretune --list-models | grep -qx prism-llm-demo ||
  { echo "the package's prism lists no prism-llm-demo shape set (/usr/share/prism/shapes)"; exit 1; }

echo "== examples/consumer against the installed package (no C++ standard asked)"
mkdir -p "$work/app"
cp "$root/examples/consumer/main.cpp" "$work/app/"
cat > "$work/app/CMakeLists.txt" << 'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(outside_app LANGUAGES CXX)
find_package(prism CONFIG REQUIRED)
add_executable(outside_app main.cpp)
target_link_libraries(outside_app PRIVATE prism::prism)
CMAKE
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$work/app" -B "$work/app/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$work/app.log" 2>&1 ||
  { cat "$work/app.log"; exit 1; }
cmake --build "$work/app/build" >> "$work/app.log" 2>&1 || { cat "$work/app.log"; exit 1; }
grep -q -- '-std=\(gnu\|c\)++20' "$work/app/build/compile_commands.json" ||
  { echo "the app was not compiled as C++20 (prism::prism must carry cxx_std_20)"; exit 1; }
"$work/app/build/outside_app" | tee "$work/run.txt"
grep -q "results verified" "$work/run.txt"
# It must load the packaged library, not the build tree's.
used=$(ldd "$work/app/build/outside_app" | awk '/libprism_runtime/ {print $3}')
[ "$(readlink -f "$used")" = "$(readlink -f "$lib")" ] ||
  { echo "the app loads $used, not the packaged $lib"; exit 1; }
echo "test-package: OK ($(basename "$deb"))"
