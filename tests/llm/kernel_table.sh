#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# prism-llm's decode kernel table (graph on): the timed replay's device time per kernel, in the
# text report and as --json's decode_kernels. Its calls must add up to the step's commands and
# its times to decode_kernel_ms_per_token, largest first; the step's device span
# (decode_step_device_ms) is at least half its longest kernel. --fuse auto (the default) resolves to
# every fusion, the block (post_attention) included, for f32 and bf16 weights, and on CPU devices
# to every fusion but the block for block-quantized ones (--quantize q4_0), where the int8-activation
# GEMVs beat post_attention's quantized form, and the gate/up GEMV takes the MLP's SiLU * mul
# (--check passes); asked for, the block's form runs and passes --check too.
# usage: kernel_table.sh PRISM_LLM WORK_DIR
set -euo pipefail
bin=$1
dir=$2
mkdir -p "$dir"
"$bin" --preset tiny --prompt-len 8 --new-tokens 8 --graph on --warmup 0 --breakdown-steps 0 \
  --json "$dir/run.json" > "$dir/run.out"
grep -q '^decode kernels (device time of one step' "$dir/run.out" || { cat "$dir/run.out"; exit 1; }
python3 - "$dir/run.json" << 'PY'
import json, sys
j = json.load(open(sys.argv[1]))
k = j["decode_kernels"]
assert k, "decode_kernels is empty"
calls = sum(e["calls"] for e in k)
assert calls == j["decode_step_commands"], (calls, j["decode_step_commands"])
us = sum(e["us"] for e in k)
want = 1e3 * j["decode_kernel_ms_per_token"]
assert abs(us - want) <= 1e-6 * max(want, 1.0) + 1e-3, (us, want)
assert all(e["name"] and e["us"] >= 0 for e in k), k
assert [e["us"] for e in k] == sorted((e["us"] for e in k), reverse=True), k
assert len({e["name"] for e in k}) == len(k), "a kernel listed twice"
assert j["fuse"] == "attention,mlp,norm,block", j["fuse"]
assert any("post_attention" in e["name"] for e in k), k
# The step's device time (another replay: half its longest kernel, timing noise aside).
span = 1e3 * j["decode_step_device_ms"]
assert span >= 0.5 * max(e["us"] / e["calls"] for e in k), (span, k)
assert isinstance(j["decode_step_queued_ahead"], bool), j["decode_step_queued_ahead"]
print(f"{len(k)} kernels, {calls} commands, {us:.1f} us")
PY
"$bin" --preset tiny --dtype bf16 --prompt-len 8 --new-tokens 4 --graph on --warmup 0 --breakdown-steps 0 \
  --json "$dir/bf16.json" > "$dir/bf16.out"
"$bin" --preset tiny --quantize q4_0 --prompt-len 8 --new-tokens 4 --graph on --warmup 0 --breakdown-steps 0 \
  --check --json "$dir/q4.json" > "$dir/q4.out"
grep -q '^check vs host reference.*PASS$' "$dir/q4.out" || { cat "$dir/q4.out"; exit 1; }
"$bin" --preset tiny --quantize q4_0 --prompt-len 8 --new-tokens 4 --graph on --warmup 0 --breakdown-steps 0 \
  --fuse attention,norm --json "$dir/q4_nomlp.json" > "$dir/q4_nomlp.out"
# On CPU devices the quantized MLP's SiLU * mul rides the gate/up GEMV (linear_silu_and_mul's
# gate/up pairs): each layer's silu_and_mul launch (ew_flat) is gone from the step.
python3 - "$dir/bf16.json" "$dir/q4.json" "$dir/q4_nomlp.json" << 'PY'
import json, sys
j, q, n = (json.load(open(p)) for p in sys.argv[1:4])
assert j["fuse"] == "attention,mlp,norm,block", j["fuse"]
assert any("post_attention" in e["name"] for e in j["decode_kernels"]), j["decode_kernels"]
assert q["fuse"] == "attention,mlp,norm", q["fuse"]
assert not any("post_attention" in e["name"] for e in q["decode_kernels"]), q["decode_kernels"]
silu = sum(e["calls"] for e in n["decode_kernels"] if e["name"] == "ew_flat")
assert silu > 0, n["decode_kernels"]
assert not any(e["name"] == "ew_flat" for e in q["decode_kernels"]), q["decode_kernels"]
assert q["decode_step_commands"] == n["decode_step_commands"] - silu, (q["decode_step_commands"], n["decode_step_commands"], silu)
PY
"$bin" --preset tiny --quantize q4_0 --prompt-len 8 --new-tokens 4 --graph on --warmup 0 --breakdown-steps 0 \
  --fuse attention,mlp,norm,block --check --json "$dir/q4_block.json" > "$dir/q4_block.out"
grep -q '^check vs host reference.*PASS$' "$dir/q4_block.out" || { cat "$dir/q4_block.out"; exit 1; }
python3 - "$dir/q4_block.json" << 'PY'
import json, sys
q = json.load(open(sys.argv[1]))
assert any("post_attention" in e["name"] for e in q["decode_kernels"]), q["decode_kernels"]
PY
# --run-ahead: greedy graph decode one step ahead of the host (on) or not (off), the same tokens
# either way; auto (the default) measures both after the warm-up and keeps the faster, which the
# report and --json name; a bad value is a usage error that lists the valid ones.
"$bin" --preset tiny --prompt-len 8 --new-tokens 8 --graph on --warmup 0 --breakdown-steps 0 --run-ahead on \
  --json "$dir/on.json" > "$dir/on.out"
grep -q 'one step ahead' "$dir/on.out" || { grep '^graph' "$dir/on.out"; exit 1; }
"$bin" --preset tiny --prompt-len 8 --new-tokens 8 --graph on --warmup 0 --breakdown-steps 0 --run-ahead off \
  --json "$dir/off.json" > "$dir/off.out"
if grep -q 'one step ahead' "$dir/off.out"; then grep '^graph' "$dir/off.out"; exit 1; fi
python3 - "$dir/on.json" "$dir/off.json" "$dir/run.json" "$dir/run.out" << 'PY'
import json, sys
on, off, auto = (json.load(open(p)) for p in sys.argv[1:4])
assert on["run_ahead"] == "on" and off["run_ahead"] == "off", (on["run_ahead"], off["run_ahead"])
assert on["tokens"] == off["tokens"] == auto["tokens"] and len(on["tokens"]) == 8, (on["tokens"], off["tokens"])
# auto under --graph on: both graph modes measured (eager not), the faster of the two kept.
p = auto["graph_probe_ms_per_token"]
assert p["eager"] == 0 and p["graph"] > 0 and p["graph_ahead"] > 0, p
assert auto["run_ahead"] == ("on" if p["graph_ahead"] <= p["graph"] else "off"), (auto["run_ahead"], p)
line = next(l for l in open(sys.argv[4]) if l.startswith("graph"))
assert ("one step ahead," in line) == (auto["run_ahead"] == "on") and "graph one step ahead)" in line, line
for j in (on, off):  # given explicitly: nothing to measure
    assert all(v == 0 for v in j["graph_probe_ms_per_token"].values()), j["graph_probe_ms_per_token"]
PY
if "$bin" --preset tiny --run-ahead maybe --new-tokens 2 > "$dir/bad.out" 2>&1; then
  echo "--run-ahead maybe was accepted"; exit 1
fi
grep -q "run-ahead" "$dir/bad.out" && grep -q "on" "$dir/bad.out" || { cat "$dir/bad.out"; exit 1; }
