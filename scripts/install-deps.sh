#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs prism's Debian build and test dependencies; idempotent and non-interactive.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git ccache
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers opencl-clhpp-headers clinfo
  libclblast-dev libyaml-cpp-dev libsqlite3-dev sqlite3
  libpq-dev postgresql
  libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
  libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-jsonschema python3-dev
  clang-16 libclang-rt-16-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
