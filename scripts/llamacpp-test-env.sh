#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# llama.cpp for the quantization accuracy test (llm.hf.perplexity compares prism's perplexity
# gaps with llama.cpp's on the same GGUF files): prints the python of the benchmark venv
# (benchmarks/llm/llamacpp-env.sh) when it exists or can be made from a llama-cpp-python wheel
# already built into the pip cache (~1 min); prints nothing otherwise, and the test then skips
# its llama.cpp comparison (exit 77). Building llama.cpp from source costs tens of minutes on 2
# cores, more than CI's budget: PRISM_BUILD_LLAMACPP=1 allows it (once; the wheel stays cached).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${PRISM_BENCH_VENV:-$HOME/.cache/prism/bench-venv}
cache=${PRISM_PIP_CACHE:-$HOME/.cache/prism/pip}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import llama_cpp" 2> /dev/null ||
  [ "${PRISM_BUILD_LLAMACPP:-0}" = 1 ] ||
  find "$cache" -name 'llama_cpp_python-0.3.36-*.whl' 2> /dev/null | grep -q .; then
  bash "$root/benchmarks/llm/llamacpp-env.sh"
else
  echo "llamacpp-test-env.sh: no llama-cpp-python wheel in $cache; llm.hf.perplexity skips its llama.cpp" \
    "comparison (PRISM_BUILD_LLAMACPP=1 builds it, tens of minutes)" >&2
fi
