#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# prism-llm's greedy graph decode one step ahead of the host (--run-ahead on, the default) against
# reading each token before the next step is enqueued (off), interleaved rounds on one machine:
# decode tokens/s, launch_us_per_command (the decode time per token above the step's kernel
# device time, per command) and the kernels' own time per token. Same tokens either way.
# usage: benchmarks/llm/run_ahead.sh [BUILD_DIR]
# env:   PRESETS ("demo small") ROUNDS (4) NEW_TOKENS (200) PROMPT_LEN (32) DTYPE (f32)
#        PRISM_DEVICE (e.g. nvidia), EXTRA (more prism-llm arguments, e.g. "--model f.gguf")
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PRISM_TUNING_DB=${PRISM_TUNING_DB:-$tmp/tuning.db}
for preset in ${PRESETS:-demo small}; do
  for round in $(seq "${ROUNDS:-4}"); do
    for ahead in on off; do
      # shellcheck disable=SC2086
      "$build/bin/prism-llm" --preset "$preset" --dtype "${DTYPE:-f32}" --prompt-len "${PROMPT_LEN:-32}" \
        --new-tokens "${NEW_TOKENS:-200}" --graph on --repeat 3 --breakdown-steps 0 --run-ahead "$ahead" \
        ${EXTRA:-} --json "$tmp/r.json" > "$tmp/log.txt" 2>&1 || { tail -5 "$tmp/log.txt"; exit 1; }
      python3 - "$tmp/r.json" "$preset" "$round" "$ahead" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]} round {sys.argv[3]} run-ahead {sys.argv[4]:3}: decode {j['decode_tokens_per_s']:8.1f} tokens/s, "
      f"{j['launch_us_per_command']:6.2f} us a command above {j['decode_kernel_ms_per_token']:.3f} ms of kernels "
      f"({j['decode_step_commands']} commands), tokens hash {hash(tuple(j['tokens'])) & 0xffffff:06x}")
PY
    done
  done
done
