#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch reference for prism's decode_attention benchmark shapes (prism_bench_ops).

One query token against a KV cache: q [1, Hq, 1, D], k and v [1, Hk, L, D], grouped-query
(enable_gqa), torch.nn.functional.scaled_dot_product_attention, CUDA-event median after a
warm-up. Reports µs and the K/V bytes read per µs (the bound prism's target is stated against).
Run on the GPU machine: python3 benchmarks/gpu/torch_decode_attention.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from torch_reference import time_ms  # noqa: E402  (CUDA-event median after a warm-up)


def main():
    torch.manual_seed(0)
    # (heads, kv_heads, d, visible keys): prism_bench_ops' cases (the sample fills 2/3 of max_seq).
    cases = [(32, 8, 128, 4097), (16, 8, 128, 2731)]
    print(f"{'case':<28} {'dtype':<6} {'us':>8} {'KV TB/s':>8}")
    for hq, hk, d, n in cases:
        for dt in (torch.float32, torch.bfloat16):
            q = torch.randn(1, hq, 1, d, device="cuda", dtype=dt)
            k = torch.randn(1, hk, n, d, device="cuda", dtype=dt)
            v = torch.randn(1, hk, n, d, device="cuda", dtype=dt)
            us = 1000.0 * time_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), 10, 100)
            kv_bytes = 2 * k.numel() * k.element_size()
            name = f"heads={hq},kv_heads={hk},keys={n}"
            print(f"{name:<28} {str(dt).split('.')[-1]:<6} {us:8.1f} {kv_bytes / us / 1e6:8.2f}")


if __name__ == "__main__":
    main()
