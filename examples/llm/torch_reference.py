#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The PyTorch reference for prism-llm: the same Llama/Qwen-style decoder, f32, TF32 off, eager,
# reading the weights prism-llm wrote (--save-weights) and comparing with its logits dump.
#
#   prism-llm --preset demo --save-weights w.safetensors --dump-logits prism.json --json prism_run.json
#   python3 examples/llm/torch_reference.py --weights w.safetensors --compare prism.json
#
# Needs only torch (no transformers, no safetensors package). Prints tokens/s for prefill and
# decode, the max logits difference and whether the greedy token ids match prism's.
import argparse
import json
import math
import struct
import sys
import time

import torch
import torch.nn.functional as F


def read_safetensors(path, device):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + b : base + end]), dtype=dtypes[e["dtype"]])
        tensors[name] = t.reshape(e["shape"]).to(device=device, dtype=torch.float32)
    return tensors, meta


class Model:
    def __init__(self, w, meta):
        self.w = w
        self.hidden = int(meta["hidden_size"])
        self.layers = int(meta["num_hidden_layers"])
        self.heads = int(meta["num_attention_heads"])
        self.kv_heads = int(meta["num_key_value_heads"])
        self.head_dim = int(meta["head_dim"])
        self.vocab = int(meta["vocab_size"])
        self.theta = float(meta["rope_theta"])
        self.eps = float(meta["rms_norm_eps"])
        self.max_seq = int(meta["max_position_embeddings"])
        self.qk_norm = meta.get("qk_norm") == "true"
        self.bias = meta.get("attention_bias") == "true"
        self.lm_head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        dev = self.lm_head.device
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))
        ang = torch.arange(self.max_seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
        self.cos = torch.cos(ang).float().to(dev)
        self.sin = torch.sin(ang).float().to(dev)
        self.reset()

    def reset(self):
        dev = self.lm_head.device
        shape = (self.layers, 1, self.kv_heads, self.max_seq, self.head_dim)
        self.k_cache = torch.zeros(shape, device=dev)
        self.v_cache = torch.zeros(shape, device=dev)
        self.pos = 0

    def rms_norm(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight

    def rope(self, x, pos):  # x: [n, heads, d], NeoX (rotate_half) layout
        half = self.head_dim // 2
        c = self.cos[pos][:, None, :]
        s = self.sin[pos][:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    def forward(self, ids):  # ids: [n] -> next-token logits [vocab]
        w = self.w
        n = ids.shape[0]
        pos = torch.arange(self.pos, self.pos + n, device=ids.device)
        x = w["model.embed_tokens.weight"][ids]
        group = self.heads // self.kv_heads
        for l in range(self.layers):
            p = f"model.layers.{l}."
            h = self.rms_norm(x, w[p + "input_layernorm.weight"])
            q = F.linear(h, w[p + "self_attn.q_proj.weight"], w.get(p + "self_attn.q_proj.bias"))
            k = F.linear(h, w[p + "self_attn.k_proj.weight"], w.get(p + "self_attn.k_proj.bias"))
            v = F.linear(h, w[p + "self_attn.v_proj.weight"], w.get(p + "self_attn.v_proj.bias"))
            q = q.view(n, self.heads, self.head_dim)
            k = k.view(n, self.kv_heads, self.head_dim)
            v = v.view(n, self.kv_heads, self.head_dim)
            if self.qk_norm:
                q = self.rms_norm(q, w[p + "self_attn.q_norm.weight"])
                k = self.rms_norm(k, w[p + "self_attn.k_norm.weight"])
            q, k = self.rope(q, pos), self.rope(k, pos)
            self.k_cache[l, 0, :, self.pos : self.pos + n] = k.transpose(0, 1)
            self.v_cache[l, 0, :, self.pos : self.pos + n] = v.transpose(0, 1)
            keys = self.k_cache[l, :, :, : self.pos + n].repeat_interleave(group, dim=1)
            vals = self.v_cache[l, :, :, : self.pos + n].repeat_interleave(group, dim=1)
            a = F.scaled_dot_product_attention(q.transpose(0, 1)[None], keys, vals, is_causal=(n > 1 and self.pos == 0))
            if n > 1 and self.pos != 0:
                raise ValueError("chunked prefill is not needed by this script")
            a = a[0].transpose(0, 1).reshape(n, self.heads * self.head_dim)
            x = x + F.linear(a, w[p + "self_attn.o_proj.weight"])
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            g = F.linear(h, w[p + "mlp.gate_proj.weight"])
            u = F.linear(h, w[p + "mlp.up_proj.weight"])
            x = x + F.linear(F.silu(g) * u, w[p + "mlp.down_proj.weight"])
        h = self.rms_norm(x[-1:], w["model.norm.weight"])
        self.pos += n
        return F.linear(h, self.lm_head)[0]


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def generate(model, prompt, new_tokens, dev):
    model.reset()
    sync(dev)
    t0 = time.perf_counter()
    logits = model.forward(prompt)
    nxt = torch.argmax(logits)
    tokens = [int(nxt)]  # the host read is part of the step, as in prism-llm
    t1 = time.perf_counter()
    for _ in range(new_tokens - 1):
        nxt = torch.argmax(model.forward(nxt.reshape(1)))
        tokens.append(int(nxt))
    sync(dev)
    t2 = time.perf_counter()
    return tokens, logits, t1 - t0, t2 - t1


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--weights", required=True, help="safetensors file written by prism-llm --save-weights")
    ap.add_argument("--compare", help="prism-llm --dump-logits JSON: prompt, tokens and logits to compare")
    ap.add_argument("--prompt", help="comma-separated token ids (default: the prompt in --compare)")
    ap.add_argument("--new-tokens", type=int, help="default: as many as prism generated")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=3, help="timed generations; the best is reported")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device(args.device)
    prism = json.load(open(args.compare)) if args.compare else None
    if args.prompt:
        prompt_ids = [int(t) for t in args.prompt.split(",")]
    elif prism:
        prompt_ids = prism["prompt"]
    else:
        sys.exit("need --prompt or --compare")
    new_tokens = args.new_tokens or (len(prism["tokens"]) if prism else 32)

    w, meta = read_safetensors(args.weights, dev)
    model = Model(w, meta)
    prompt = torch.tensor(prompt_ids, device=dev)
    with torch.inference_mode():
        generate(model, prompt, min(new_tokens, 3), dev)  # warm-up
        best = None
        for _ in range(args.repeats):
            r = generate(model, prompt, new_tokens, dev)
            if best is None or r[2] + r[3] < best[2] + best[3]:
                best = r
    tokens, logits, prefill_s, decode_s = best
    out = {
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "prompt_tokens": len(prompt_ids),
        "new_tokens": new_tokens,
        "prefill_tokens_per_s": len(prompt_ids) / prefill_s,
        "decode_tokens_per_s": (new_tokens - 1) / decode_s if new_tokens > 1 else 0.0,
        "tokens": tokens,
    }
    print(f"torch {out['torch']} on {out['device']}, f32, TF32 off, eager")
    print(f"prefill {len(prompt_ids)} tokens: {out['prefill_tokens_per_s']:.1f} tokens/s")
    print(f"decode  {new_tokens - 1} tokens: {out['decode_tokens_per_s']:.1f} tokens/s")
    status = 0
    if prism:
        ref = logits.double().cpu()
        got = torch.tensor(prism["logits"], dtype=torch.float64)
        diff = (ref - got).abs().max().item()
        scale = max(1.0, ref.abs().max().item())
        same = tokens == prism["tokens"]
        # f32 tolerance of prism's own check (examples/llm/run.hpp): 2e-4 relative to max |logit|.
        ok = diff <= 2e-4 * scale
        out.update(logits_max_abs_diff=diff, logits_max_abs=scale, tokens_identical=same)
        print(f"prism vs torch: next-token logits max |diff| {diff:.3g} (max |logit| {scale:.3g}): "
              f"{'OK' if ok else 'TOO LARGE'}; token ids {'identical' if same else 'DIFFER'}")
        if not same:
            print(f"  torch: {tokens}\n  prism: {prism['tokens']}")
        status = 0 if ok else 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return status


if __name__ == "__main__":
    sys.exit(main())
