#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cuBLAS (through PyTorch) GEMM figures for the shapes gemm_harness measures, to run back to back
with it on the GPU machine: python3 benchmarks/gpu/torch_gemm.py [SHAPES...] where a shape is
MxNxK (linear layout: y[M, N] = a[M, K] @ w[N, K]^T). Prints f32 (TF32 off), tf32 and bf16 times
(CUDA events, median of repeats after warm-up) and TFLOP/s."""
import sys

import torch

DEFAULT = ["1024x1024x1024", "2048x2048x2048", "4096x4096x4096", "8192x8192x8192",
           "128x4096x4096", "128x11008x4096", "128x4096x11008", "512x4096x4096",
           "16x4096x4096", "16x11008x4096", "16x4096x11008",
           "1x4096x4096", "1x11008x4096", "1x4096x11008"]


def time_us(fn, iters):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    shapes = sys.argv[1:] or DEFAULT
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"{'shape':>18} {'mode':>5} {'us':>10} {'TFLOP/s':>9}")
    for s in shapes:
        m, n, k = (int(v) for v in s.split("x"))
        flops = 2.0 * m * n * k
        iters = 20 if flops > 1e11 else 100
        for mode in ("f32", "tf32", "bf16"):
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
            dt = torch.bfloat16 if mode == "bf16" else torch.float32
            a = torch.rand(m, k, device="cuda", dtype=dt) * 2 - 1
            w = torch.rand(n, k, device="cuda", dtype=dt) * 2 - 1
            us = time_us(lambda: torch.nn.functional.linear(a, w), iters)
            print(f"{s:>18} {mode:>5} {us:10.1f} {flops / us / 1e6:9.2f}", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    main()
