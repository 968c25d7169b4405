# SPDX-License-Identifier: Apache-2.0
"""Issue 14's load target: prism-llm's load of a ~0.5 GB safetensors checkpoint against a plain
read of the same file, page cache warm, interleaved rounds.

Writes (numpy only, no downloads) a random Llama folder of SmolLM-135M's shape (hidden 576,
30 layers, 9 heads / 3 kv x 64, ffn 1536, vocab 49152, tied; 134.5M parameters, f32
model.safetensors of 0.54 GB), with the tensors in the order of Hugging Face's writer
(safetensors sorts by name: q/k/v apart, gate/up together) or, with --order prism, in the order
prism-llm's own writer uses (q, k, v and gate, up back to back). Then, each round in a rotating
order: (a) `cat model.safetensors > /dev/null` (wall, from the parent: fork + exec included),
(b) a read(2) loop of the file into a reused 128 KiB buffer in this process (as cat), (c) prism-llm
--model FOLDER --dtype f32 and (d) --dtype bf16, each load as prism-llm reports it
(--json load_seconds: open + map + checks + device tensors + the decoder's fusion of q/k/v and
gate/up; the OpenCL start-up before it and the KV caches after it are not counted; the time
with the KV caches, weights + upload, is printed too). Prints every round and the ratios load / cat (median, range).

With --file-dtype bf16|f16 the file stores its tensors in that dtype (the same random values,
rounded to nearest even), and --dtypes picks the run dtypes (default f32,bf16), so every
converting load can be timed: f32 -> bf16 / f16, bf16 / f16 -> f32.

Usage: python load_vs_read.py PRISM_LLM OUT_DIR [--rounds N] [--order hf|prism]
                              [--file-dtype f32|bf16|f16] [--dtypes f32,bf16,f16]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

SHAPE = dict(vocab=49152, hidden=576, layers=30, heads=9, kv_heads=3, head_dim=64, ffn=1536)


def tensors(order):
    s = SHAPE
    h, q, kv, f = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"], s["ffn"]
    out = [("model.embed_tokens.weight", (s["vocab"], h))]
    for layer in range(s["layers"]):
        p = f"model.layers.{layer}."
        out += [(p + "input_layernorm.weight", (h,)), (p + "self_attn.q_proj.weight", (q, h)),
                (p + "self_attn.k_proj.weight", (kv, h)), (p + "self_attn.v_proj.weight", (kv, h)),
                (p + "self_attn.o_proj.weight", (h, q)), (p + "post_attention_layernorm.weight", (h,)),
                (p + "mlp.gate_proj.weight", (f, h)), (p + "mlp.up_proj.weight", (f, h)),
                (p + "mlp.down_proj.weight", (h, f))]
    out.append(("model.norm.weight", (h,)))
    if order == "hf":
        out.sort(key=lambda t: t[0])  # what safetensors' writer does for tensors of one dtype
    return out


def stored(a, file_dtype):
    """`a` (f32) as the file's dtype: (safetensors dtype name, little-endian bytes)."""
    if file_dtype == "f16":
        return "F16", a.astype("<f2").tobytes()
    if file_dtype == "bf16":  # numpy has no bf16: round the f32 bits to nearest even by hand
        u = a.astype("<f4").view(np.uint32)
        return "BF16", ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()
    return "F32", a.astype("<f4").tobytes()


def write_folder(folder, order, file_dtype):
    path = os.path.join(folder, "model.safetensors")
    if os.path.exists(path):
        return path
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    header, offset, plan = {"__metadata__": {"format": "pt"}}, 0, tensors(order)
    for name, shape in plan:
        n = int(np.prod(shape)) * {"f32": 4, "bf16": 2, "f16": 2}[file_dtype]
        header[name] = {"dtype": stored(np.zeros(1, np.float32), file_dtype)[0], "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name, shape in plan:
            if name.endswith("norm.weight"):
                a = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
            else:
                a = rng.standard_normal(shape, dtype=np.float32) * np.float32(1.0 / np.sqrt(shape[-1]))
            f.write(stored(a, file_dtype)[1])
    os.replace(path + ".tmp", path)
    s = SHAPE
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "_name_or_path": "llama-135m",
              "hidden_size": s["hidden"], "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
              "num_key_value_heads": s["kv_heads"], "head_dim": s["head_dim"], "intermediate_size": s["ffn"],
              "vocab_size": s["vocab"], "max_position_embeddings": 2048, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    return path


def time_cat(path):
    t0 = time.perf_counter()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def time_read(path):
    buf = bytearray(128 << 10)  # cat's buffer size: the copy stays in the cache
    view = memoryview(buf)
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while f.readinto(view):
            pass
    return time.perf_counter() - t0


def time_load(prism_llm, folder, dtype, out_dir):
    js = os.path.join(out_dir, f"load_{dtype}.json")
    cmd = [prism_llm, "--model", folder, "--dtype", dtype, "--prompt-ids", "1,2,3", "--new-tokens", "1",
           "--warmup", "0", "--breakdown-steps", "0", "--graph", "off", "--json", js]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    with open(js) as f:
        j = json.load(f)
    if j["load_path"] != "device":
        sys.exit(f"load_vs_read: prism-llm took the {j['load_path']} path, expected device")
    return j["load_seconds"], j["load_bytes"], j["weights_seconds"] + j["upload_seconds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prism_llm")
    ap.add_argument("out_dir")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--order", choices=["hf", "prism"], default="hf")
    ap.add_argument("--file-dtype", choices=["f32", "bf16", "f16"], default="f32")
    ap.add_argument("--dtypes", default="f32,bf16", help="run dtypes, comma separated (f32, bf16, f16)")
    a = ap.parse_args()
    runs = a.dtypes.split(",")
    for d in runs:
        if d not in ("f32", "bf16", "f16"):
            sys.exit(f"load_vs_read: --dtypes: unknown dtype '{d}'; valid: f32, bf16, f16")
    suffix = "" if a.file_dtype == "f32" else f"-{a.file_dtype}"
    folder = os.path.join(a.out_dir, f"llama-135m-{a.order}{suffix}")
    path = write_folder(folder, a.order, a.file_dtype)
    size = os.path.getsize(path)
    print(f"load_vs_read: {path}: {size} bytes, tensor order {a.order}, file dtype {a.file_dtype}, load average "
          f"{os.getloadavg()[0]:.1f}")
    time_cat(path)  # the page cache warm before the first round
    kinds = ["cat", "read"] + runs
    times = {k: [] for k in kinds}
    with_caches = {k: [] for k in runs}
    for r in range(a.rounds):
        order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
        row = {}
        for k in order:
            if k == "cat":
                row[k] = time_cat(path)
            elif k == "read":
                row[k] = time_read(path)
            else:
                row[k], loaded, whole = time_load(a.prism_llm, folder, k, a.out_dir)
                assert loaded == size, (loaded, size)
                with_caches[k].append(whole)
            times[k].append(row[k])
        print(f"round {r + 1}: " + ", ".join(f"{k} {row[k]:.3f} s" for k in kinds) + "; " +
              ", ".join(f"{k}/cat {row[k] / row['cat']:.2f}x" for k in runs) +
              f", load {os.getloadavg()[0]:.1f}")
    for k in kinds:
        v = times[k]
        print(f"{k:5s} s: median {statistics.median(v):.3f}, range {min(v):.3f}-{max(v):.3f}")
    for k in runs:
        for base in ["cat", "read"]:
            ratios = [x / y for x, y in zip(times[k], times[base])]
            print(f"{k} load / {base}: median {statistics.median(ratios):.2f}x, "
                  f"range {min(ratios):.2f}-{max(ratios):.2f}x")
        v = with_caches[k]
        ratios = [x / y for x, y in zip(v, times["cat"])]
        print(f"{k} load + KV caches (weights + upload) s: median {statistics.median(v):.3f}, range "
              f"{min(v):.3f}-{max(v):.3f}; / cat: median {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
