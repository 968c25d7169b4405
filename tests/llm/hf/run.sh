#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs hf_check.py in the Python environment of scripts/python-env.sh (PRISM_PYTHON, else the
# default venv). Exits 77 (CTest: skipped) when there is none: tests never download anything;
# scripts/test.sh creates the environment before ctest.
set -euo pipefail
python=${PRISM_PYTHON:-${PRISM_VENV:-$HOME/.cache/prism/venv}/bin/python}
# python-env.sh writes prism-requirements.txt into the venv once every package is in.
if [ ! -x "$python" ] || [ ! -f "$(dirname "$python")/../prism-requirements.txt" ]; then
  echo "no complete Python environment at $python: run scripts/python-env.sh (scripts/test.sh does)" >&2
  exit 77
fi
exec "$python" "$(dirname "${BASH_SOURCE[0]}")/hf_check.py" "$@"
