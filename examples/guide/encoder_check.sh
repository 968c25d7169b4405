#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs encoder_check.py in the Python environment of scripts/python-env.sh (PRISM_PYTHON, else the
# default venv); exits 77 (CTest: skipped) when there is none. Nothing is downloaded.
set -euo pipefail
python=${PRISM_PYTHON:-${PRISM_VENV:-$HOME/.cache/prism/venv}/bin/python}
if [ ! -x "$python" ] || [ ! -f "$(dirname "$python")/../prism-requirements.txt" ]; then
  echo "no complete Python environment at $python: run scripts/python-env.sh (scripts/test.sh does)" >&2
  exit 77
fi
exec "$python" "$(dirname "${BASH_SOURCE[0]}")/encoder_check.py" "$@"
