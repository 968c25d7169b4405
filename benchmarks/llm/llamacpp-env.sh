#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Creates or reuses the benchmark's Python environment with llama-cpp-python, which builds
# llama.cpp from source (tens of minutes on 2 cores: run it ahead of the benchmark), on top of the
# test environment (scripts/python-env.sh). Prints its python. PRISM_BENCH_VENV applies
# (default ~/.cache/prism/bench-venv).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${PRISM_BENCH_VENV:-$HOME/.cache/prism/bench-venv}
export PIP_CACHE_DIR=${PRISM_PIP_CACHE:-$HOME/.cache/prism/pip}
version=0.3.36
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$version')" 2> /dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
echo "llamacpp-env.sh: creating $venv (builds llama.cpp $version from source)" >&2
python3 -m venv --clear "$venv"
# Native build: the reference uses every instruction the CPU has, as a user's build would.
CMAKE_ARGS=${CMAKE_ARGS:-"-DGGML_NATIVE=ON"} CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  "$venv/bin/pip" install -q "llama-cpp-python==$version" numpy >&2
echo "$venv/bin/python"
