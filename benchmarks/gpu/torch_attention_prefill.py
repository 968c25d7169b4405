#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch reference for prism's causal prefill attention benchmark shapes (prism_bench_ops).

q [1, Hq, 2048, 128], k and v [1, Hk, 2048, 128], causal, torch.nn.functional
.scaled_dot_product_attention with whatever backend PyTorch picks (FlashAttention-2 for bf16,
memory-efficient attention for f32; TF32 off), CUDA-event median after a warm-up. Prints µs and
TFLOP/s counted as prism's descriptor counts them (the keys each causal row sees).
Run on the GPU machine: python3 benchmarks/gpu/torch_attention_prefill.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from torch_reference import time_ms  # noqa: E402  (CUDA-event median after a warm-up)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    cases = [(32, 32, 2048, 128), (32, 8, 2048, 128)]
    print(f"{'case':<32} {'dtype':<9} {'us':>9} {'TFLOP/s':>8}")
    for hq, hk, n, d in cases:
        for dt in (torch.float32, torch.bfloat16):
            q = torch.rand(1, hq, n, d, device="cuda", dtype=dt) * 2 - 1
            k = torch.rand(1, hk, n, d, device="cuda", dtype=dt) * 2 - 1
            v = torch.rand(1, hk, n, d, device="cuda", dtype=dt) * 2 - 1
            fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=hq != hk)  # noqa: E731
            us = 1000.0 * time_ms(fn, 10, 50)
            flops = 2.0 * hq * (n * (n + 1) / 2) * (2 * d)
            name = f"hq={hq},hkv={hk},l={n},d={d}"
            print(f"{name:<32} {str(dt).split('.')[-1]:<9} {us:9.1f} {flops / us / 1e6:8.2f}")


if __name__ == "__main__":
    main()
