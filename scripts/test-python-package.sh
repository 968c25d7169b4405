#!/usr/bin/env bash
# Proves `pip install .`: builds the wheel from the repository root with scikit-build-core (no
# network: --no-build-isolation uses the venv's scikit-build-core and nanobind, --no-deps), installs
# it into a fresh --target directory and runs the module from there in a clean environment: an op,
# numpy round trip, the shipped stubs and data, and `python -m prism` (the CLI inside the wheel).
# Usage: test-python-package.sh PYTHON BUILD_DIR. BUILD_DIR keeps the CMake build between runs
# (ccache and Ninja make a second run cheap).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${1:?usage: test-python-package.sh PYTHON BUILD_DIR}
build=${2:?usage: test-python-package.sh PYTHON BUILD_DIR}
target=$(mktemp -d)
trap 'rm -rf "$target"' EXIT
export CCACHE_BASEDIR=$root
# scikit-build-core would build with Python's own compiler names (sysconfig: g++, gcc); CMake's
# defaults (c++, cc) instead, the compilers of prism's other builds, so that ccache serves this
# build the objects of examples.static_consumer's identical static build (ccache hashes the name).
export CC=${CC:-cc} CXX=${CXX:-c++}
args=()
command -v ccache > /dev/null && args+=(-Ccmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
start=$(date +%s)
"$python" -m pip install -q --no-deps --no-build-isolation --no-index --target "$target" \
  -Cbuild-dir="$build" "${args[@]}" "$root"
echo "test-python-package: pip install took $(($(date +%s) - start)) s"
ls "$target/prism/bin/prism" "$target/prism/ops.pyi" "$target/prism/share/prism/vendors" > /dev/null
# A clean environment: nothing from the build tree, no PRISM_DATA_DIR, run from elsewhere.
cd "$target"
env -i HOME="$HOME" PATH=/usr/bin:/bin PYTHONPATH="$target" PRISM_TUNING_DB="$target/t.db" "$python" - <<'PY'
import os, subprocess, sys
import numpy as np
import prism
assert prism.__file__.startswith(os.environ["PYTHONPATH"]), prism.__file__
assert os.environ["PRISM_DATA_DIR"].startswith(os.environ["PYTHONPATH"])
x = prism.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
np.testing.assert_allclose(prism.ops.softmax(prism.ops.add(x, 1.0)).numpy(),
                           np.exp(np.arange(6).reshape(2, 3) + 1) / np.exp(np.arange(6).reshape(2, 3) + 1).sum(1, keepdims=True), rtol=1e-5)
from prism import _stubgen
with open(os.path.join(os.path.dirname(prism.__file__), "ops.pyi")) as f:
    assert f.read() == _stubgen.render()
r = subprocess.run([sys.executable, "-m", "prism", "vendors"], capture_output=True, text=True)
assert r.returncode == 0 and "generic" in r.stdout, r.stdout + r.stderr
print("test-python-package: the installed module works:", prism.__version__, prism.get_device().name)
PY
