"""Python-side figures for benchmarks/RESULTS.md (issue 18), measured side by side in one run:

1. Per-call overhead of prism.ops.add from Python against the C++ call: `bench_dispatch`'s
   BM_ops_add_out (ops::add_out on f32[1024], queue drained every 256 calls outside the timing)
   and the same loop in Python (prism.ops.add(a, b, out=out)); also the allocating forms. Times
   are the calling thread's CPU time per call (Google Benchmark's cpu_time), and wall time.
2. A transformers forward (a random Llama) with prism.torch serving its ops against plain torch
   on the CPU, with the same thread count for torch and PoCL (POCL_MAX_PTHREAD_COUNT).

Usage: PYTHONPATH=build/python python benchmarks/python/bench_python.py [--bench-dispatch PATH]
       [--threads N] [--skip-model]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def cpp_add_out(binary, reps):
    r = subprocess.run([binary, "--benchmark_filter=BM_ops_add_out", "--benchmark_format=json",
                        f"--benchmark_repetitions={reps}", "--benchmark_report_aggregates_only=" + ("true" if reps > 1 else "false")],
                       capture_output=True, text=True, check=True)
    runs = json.loads(r.stdout)["benchmarks"]
    med = next((b for b in runs if b.get("aggregate_name") == "median"), runs[0])
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[med["time_unit"]]
    return med["cpu_time"] * scale, med["real_time"] * scale


def py_loop(call, q, calls=256 * 40, batch=256):
    """Per-call thread CPU time and wall time, the queue drained between batches (untimed)."""
    for _ in range(batch):
        call()
    q.wait()
    cpu = wall = 0.0
    for _ in range(calls // batch):
        c0, w0 = time.thread_time(), time.perf_counter()
        for _ in range(batch):
            call()
        cpu += time.thread_time() - c0
        wall += time.perf_counter() - w0
        q.wait()
    return cpu / calls * 1e6, wall / calls * 1e6


def overhead(args):
    import numpy as np
    import prism

    q = prism.default_queue()
    a = prism.tensor(np.ones(1024, np.float32))
    b = prism.tensor(np.ones(1024, np.float32))
    out = prism.empty((1024,))
    add = prism.ops.add
    rows = []
    for rep in range(args.reps):
        cpp_cpu, cpp_wall = cpp_add_out(args.bench_dispatch, 1)
        py_cpu, py_wall = py_loop(lambda: add(a, b, out=out), q)
        rows.append((cpp_cpu, cpp_wall, py_cpu, py_wall))
    alloc_cpu, alloc_wall = py_loop(lambda: add(a, b), q, calls=256 * 10)
    med = [statistics.median(r[i] for r in rows) for i in range(4)]
    return {"cpp_add_out_cpu_us": med[0], "cpp_add_out_wall_us": med[1], "py_add_out_cpu_us": med[2],
            "py_add_out_wall_us": med[3], "py_minus_cpp_cpu_us": med[2] - med[0],
            "py_minus_cpp_wall_us": med[3] - med[1], "py_add_alloc_cpu_us": alloc_cpu,
            "py_add_alloc_wall_us": alloc_wall, "reps": args.reps}


def model(args):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    import prism.torch as pt

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=256,
                         attn_implementation="sdpa")
    m = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, config.vocab_size, (1, args.tokens), generator=torch.Generator().manual_seed(1))

    def timed(n):
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            m(input_ids=ids)
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e3

    with torch.no_grad():
        m(input_ids=ids)
        with pt.use_prism():
            m(input_ids=ids)  # kernel builds, tuning lookups
        torch_ms, prism_ms = [], []
        for _ in range(args.reps):  # interleaved, so load changes hit both
            torch_ms.append(timed(3))
            with pt.use_prism():
                prism_ms.append(timed(3))
        pt.reset_stats()
        with pt.use_prism():
            m(input_ids=ids)
        served = {k: v for k, v in pt.stats().items()}
    t, p = statistics.median(torch_ms), statistics.median(prism_ms)
    return {"tokens": args.tokens, "threads": args.threads, "torch_ms": t, "prism_bridge_ms": p,
            "ratio_prism_over_torch": p / t, "ops": served}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-dispatch", default=os.path.join("build", "bin", "bench_dispatch"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--skip-model", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", str(args.threads))  # read when PoCL starts
    import prism

    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": prism.get_device().name,
           "load": os.getloadavg()[0], "overhead": overhead(args)}
    if not args.skip_model:
        out["model"] = model(args)
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
