#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Creates or reuses the Python environment the LLM tests compare prism against, and prints its
# python. The wheels are kept under ~/.cache/prism/wheels (PyPI's responses here are not
# cacheable, so pip's own cache stays empty): a venv rebuilt from them downloads nothing, and an
# existing venv with the same requirements is used as is.
# torch comes from PyPI with its nvidia-* wheels: the tests run it on the CPU only, but PyPI's
# Linux torch links the CUDA libraries (libtorch_cuda.so needs libcufile, libcudnn, ...; without
# those wheels `import torch` fails).
# PRISM_VENV (default ~/.cache/prism/venv) and PRISM_WHEELS (default ~/.cache/prism/wheels) apply.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${PRISM_VENV:-$HOME/.cache/prism/venv}
wheels=${PRISM_WHEELS:-$HOME/.cache/prism/wheels}
requirements=$root/scripts/python-requirements.txt
stamp=$venv/prism-requirements.txt
if [ -x "$venv/bin/python" ] && cmp -s "$requirements" "$stamp"; then
  echo "$venv/bin/python"
  exit 0
fi
# An existing venv whose requirements changed gets the difference installed (no torch reinstall).
if [ ! -x "$venv/bin/python" ]; then
  echo "python-env.sh: creating $venv" >&2
  python3 -m venv --clear "$venv"
else
  echo "python-env.sh: updating $venv" >&2
fi
if ! "$venv/bin/pip" install -q --no-index --find-links "$wheels" -r "$requirements" >&2 2> /dev/null; then
  echo "python-env.sh: downloading the wheels into $wheels" >&2
  "$venv/bin/pip" download -q -d "$wheels" -r "$requirements" >&2
  "$venv/bin/pip" install -q --no-index --find-links "$wheels" -r "$requirements" >&2
fi
"$venv/bin/python" -c "import torch, transformers, tokenizers, gguf, safetensors, numpy, nanobind, scikit_build_core, pytest" >&2
cp "$requirements" "$stamp"
echo "$venv/bin/python"
