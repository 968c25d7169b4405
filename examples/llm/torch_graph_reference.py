#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# PyTorch's fast decode path as the reference for prism-llm's graph decode: the same
# Llama/Qwen-style decoder (examples/llm/torch_reference.py's math) with a static KV cache, one
# token per step, the step captured once in a CUDA graph and replayed; f32 (TF32 off) or bf16.
# The position lives in a device tensor that the host sets before each replay, and the next id
# is read on the host after each step, as prism-llm does. Eager runs of the same static step are
# measured too.
#
#   prism-llm --preset qwen3-0.6b --save-weights w.safetensors --prompt-len 128 --new-tokens 32
#   python3 examples/llm/torch_graph_reference.py --weights w.safetensors --prompt-len 128 --new-tokens 32
#
# Prints and writes (--json) decode tokens/s for {eager, cuda graph} x the chosen dtypes.
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, __import__("os").path.dirname(__file__))
from torch_reference import read_safetensors  # noqa: E402


class StaticDecoder:
    """One decode step with every shape fixed: the cache holds max_seq positions and attention
    reads all of them under a mask of the positions written so far (Hugging Face's static
    cache), so the step can be captured once and replayed for any position."""

    def __init__(self, w, meta, dtype, max_seq):
        self.w = {k: v.to(dtype) for k, v in w.items()}
        self.dtype = dtype
        self.hidden = int(meta["hidden_size"])
        self.layers = int(meta["num_hidden_layers"])
        self.heads = int(meta["num_attention_heads"])
        self.kv_heads = int(meta["num_key_value_heads"])
        self.head_dim = int(meta["head_dim"])
        self.eps = float(meta["rms_norm_eps"])
        self.qk_norm = meta.get("qk_norm") == "true"
        theta = float(meta["rope_theta"])
        self.max_seq = max_seq
        self.lm_head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])
        dev = self.lm_head.device
        inv = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))
        ang = torch.arange(max_seq, dtype=torch.float64)[:, None] * inv[None, :]
        self.cos = torch.cos(ang).to(dev, dtype)
        self.sin = torch.sin(ang).to(dev, dtype)
        # Fused projections, as prism and vLLM hold them.
        self.qkv = []
        self.gate_up = []
        for l in range(self.layers):
            p = f"model.layers.{l}."
            self.qkv.append(torch.cat([self.w[p + f"self_attn.{n}_proj.weight"] for n in "qkv"]))
            self.gate_up.append(torch.cat([self.w[p + "mlp.gate_proj.weight"], self.w[p + "mlp.up_proj.weight"]]))
        shape = (self.layers, self.kv_heads, max_seq, self.head_dim)
        self.k = torch.zeros(shape, device=dev, dtype=dtype)
        self.v = torch.zeros(shape, device=dev, dtype=dtype)
        self.ids = torch.zeros(1, dtype=torch.long, device=dev)
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)
        self.slots = torch.arange(max_seq, device=dev)

    def rms_norm(self, x, weight):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(self.dtype) * weight

    def rope(self, x):  # [1, heads, d] at self.pos
        half = self.head_dim // 2
        c = self.cos[self.pos][:, None, :]
        s = self.sin[self.pos][:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    def step(self):  # self.ids at self.pos -> next id [1]
        w = self.w
        H, KV, D = self.heads, self.kv_heads, self.head_dim
        x = w["model.embed_tokens.weight"][self.ids]
        mask = (self.slots <= self.pos)[None, None, None, :]  # [1, 1, 1, max_seq]
        for l in range(self.layers):
            p = f"model.layers.{l}."
            h = self.rms_norm(x, w[p + "input_layernorm.weight"])
            qkv = F.linear(h, self.qkv[l])
            q = qkv[:, : H * D].view(1, H, D)
            k = qkv[:, H * D : (H + KV) * D].view(1, KV, D)
            v = qkv[:, (H + KV) * D :].view(1, KV, D)
            if self.qk_norm:
                q = self.rms_norm(q, w[p + "self_attn.q_norm.weight"])
                k = self.rms_norm(k, w[p + "self_attn.k_norm.weight"])
            q, k = self.rope(q), self.rope(k)
            self.k[l].index_copy_(1, self.pos, k.transpose(0, 1))
            self.v[l].index_copy_(1, self.pos, v.transpose(0, 1))
            a = F.scaled_dot_product_attention(
                q.transpose(0, 1)[None], self.k[l][None], self.v[l][None], attn_mask=mask, enable_gqa=True
            )
            a = a[0].transpose(0, 1).reshape(1, H * D)
            x = x + F.linear(a, w[p + "self_attn.o_proj.weight"])
            h = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            g, u = F.linear(h, self.gate_up[l]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(g) * u, w[p + "mlp.down_proj.weight"])
        h = self.rms_norm(x, w["model.norm.weight"])
        return torch.argmax(F.linear(h, self.lm_head), dim=-1)


def decode(model, first_pos, first_id, new_tokens, graph):
    """Tokens/s of new_tokens - 1 steps from first_pos, as prism-llm times its decode."""
    model.ids.fill_(first_id)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    tokens = []
    for i in range(new_tokens - 1):
        model.pos.fill_(first_pos + i)
        if graph is not None:
            graph.replay()
            nxt = model.graph_out
        else:
            nxt = model.step()
        model.ids.copy_(nxt)
        tokens.append(int(nxt))  # the host read of each id, as in prism-llm
    torch.cuda.synchronize()
    return (new_tokens - 1) / (time.perf_counter() - t0), tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--weights", required=True, help="safetensors written by prism-llm --save-weights")
    ap.add_argument("--prompt-len", type=int, default=128, help="decode starts at this position")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--dtypes", default="f32,bf16", help="comma-separated: f32, bf16, f16")
    ap.add_argument("--repeats", type=int, default=3, help="timed decodes; the best is reported")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_graph_reference.py: needs a CUDA device (CUDA graphs)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    w, meta = read_safetensors(args.weights, dev)
    max_seq = args.prompt_len + args.new_tokens
    kinds = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
    out = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__, "prompt_len": args.prompt_len,
           "new_tokens": args.new_tokens, "results": {}}
    for name in args.dtypes.split(","):
        if name not in kinds:
            sys.exit(f"--dtypes: unknown '{name}'; valid: {', '.join(kinds)}")
        with torch.inference_mode():
            m = StaticDecoder(w, meta, kinds[name], max_seq)
            # Warm up on a side stream (cuBLAS handles, kernels), then capture one step.
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    m.step()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                m.graph_out = m.step()
            res = {}
            for mode, graph in (("eager", None), ("cuda_graph", g)):
                best, toks = 0.0, None
                for _ in range(args.repeats):
                    tps, toks = decode(m, args.prompt_len, 1, args.new_tokens, graph)
                    best = max(best, tps)
                res[mode] = best
                print(f"torch {name} static-cache decode, {mode}: {best:.1f} tokens/s")
            out["results"][name] = res
            del m, g
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
