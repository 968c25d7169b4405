#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch/cuBLAS reference figures for the shapes prism's op and GEMM benchmarks use.

Run on the GPU machine: python3 benchmarks/gpu/torch_reference.py [--json OUT]
f32 everywhere, TF32 off, CUDA-event timing after warm-up; GB/s counts bytes read + written.
"""
import argparse
import json

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def time_ms(fn, warmup=5, iters=30):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    dev = "cuda"
    f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
    n = 16 * 1024 * 1024
    rows, d = 4096, 4096
    x = torch.randn(n, device=dev)
    y = torch.randn(n, device=dev)
    xh = x.to(f16)
    yh = y.to(f16)  # a second operand: mul(xh, xh) would read one tensor, half prism's bytes
    xb = x.to(bf16)
    m2 = torch.randn(rows, d, device=dev)
    m2h = m2.to(f16)
    r2 = torch.randn(rows, d, device=dev)
    w = torch.randn(d, device=dev)
    gate_up = torch.randn(rows, 2 * d, device=dev)
    out = {}

    def mem(name, fn, nbytes):
        ms = time_ms(fn)
        out[name] = {"ms": ms, "GB/s": nbytes / ms / 1e6}

    mem("copy/64MiB", lambda: y.copy_(x), 2 * n * 4)
    mem("neg/f32", lambda: torch.neg(x), 2 * n * 4)
    mem("exp/f32", lambda: torch.exp(x), 2 * n * 4)
    mem("gelu/f32", lambda: torch.nn.functional.gelu(x), 2 * n * 4)
    mem("silu/f32", lambda: torch.nn.functional.silu(x), 2 * n * 4)
    mem("exp/f16", lambda: torch.exp(xh), 2 * n * 2)
    mem("exp/bf16", lambda: torch.exp(xb), 2 * n * 2)
    mem("add/f32", lambda: torch.add(x, y), 3 * n * 4)
    mem("mul/f16", lambda: torch.mul(xh, yh), 3 * n * 2)
    mem("silu_and_mul/f32", lambda: torch.nn.functional.silu(gate_up[:, :d]) * gate_up[:, d:], 3 * rows * d * 4)
    mem("cast/f32->f16", lambda: x.to(f16), n * 6)
    mem("sum/f32 rows", lambda: m2.sum(dim=1), rows * d * 4)
    mem("softmax/f32", lambda: torch.softmax(m2, dim=1), 2 * rows * d * 4)
    mem("softmax/f16", lambda: torch.softmax(m2h, dim=1), 2 * rows * d * 2)
    mem("rms_norm/f32", lambda: torch.nn.functional.rms_norm(m2, (d,), w, 1e-6), 2 * rows * d * 4)
    mem("layer_norm/f32", lambda: torch.nn.functional.layer_norm(m2, (d,), w, w, 1e-5), 2 * rows * d * 4)

    def fused_add_rms():
        r2.add_(m2)
        return torch.nn.functional.rms_norm(r2, (d,), w, 1e-6)
    mem("fused_add_rms_norm/f32 (2 kernels)", fused_add_rms, 4 * rows * d * 4)

    def gemm(name, m, n_, k):
        a = torch.randn(m, k, device=dev)
        b = torch.randn(n_, k, device=dev)  # linear: y = a @ b^T
        ms = time_ms(lambda: torch.nn.functional.linear(a, b), warmup=5, iters=20)
        out[name] = {"ms": ms, "TFLOP/s": 2.0 * m * n_ * k / ms / 1e9}

    gemm("mm 1024^3", 1024, 1024, 1024)
    gemm("mm 4096^3", 4096, 4096, 4096)
    gemm("mm 128x4096x4096", 128, 4096, 4096)
    for m in (1, 16, 128):
        for (n_, k) in ((4096, 4096), (11008, 4096), (4096, 11008)):
            gemm(f"linear {m}x{n_}x{k}", m, n_, k)

    for kk, v in out.items():
        print(f"{kk:40s} " + "  ".join(f"{a}={b:.4g}" for a, b in v.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": out}, f, indent=1)


if __name__ == "__main__":
    main()
