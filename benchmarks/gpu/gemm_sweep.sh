#!/usr/bin/env bash
# On the GPU machine: the harness over a plan, then cuBLAS through PyTorch on the same shapes,
# back to back. Usage: benchmarks/gpu/gemm_sweep.sh HARNESS KERNEL_DIR PLAN OUTDIR
set -u
harness=$1 kdir=$2 plan=$3 out=$4
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$out/gpu_state.txt" 2>&1
timeout 400 "$harness" "$kdir" "$plan" > "$out/harness.txt" 2>&1; echo "harness exit $?" >> "$out/harness.txt"
PYTHONUNBUFFERED=1 timeout 120 python3 "$(dirname "$0")/torch_gemm.py" > "$out/torch.txt" 2>&1
