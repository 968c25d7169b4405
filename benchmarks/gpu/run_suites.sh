#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine: runs prism's test binaries through NVIDIA's OpenCL and PoCL, and the
# op / GEMM / attention / dispatch benchmarks on NVIDIA, from a bundle made by
# ../shared/gpu/bundle.sh. Usage: benchmarks/gpu/run_suites.sh BUNDLE OUTDIR
set -u
bundle=$1 out=$2
source "$bundle/env.sh"
export PRISM_DATA_DIR=${PRISM_DATA_DIR:-$PWD}
b=$bundle/bin
# PoCL's op suite runs on the CPU cores while the GPU one runs, to save wall time.
(PRISM_DEVICE=pocl timeout 480 "$b/prism_op_suite" --gtest_brief=1 > "$out/ops_pocl.txt" 2>&1; echo "exit $?" >> "$out/ops_pocl.txt") &
{
  for t in prism_runtime_tests test_dispatch test_dispatch_config test_ops_api prism_gemm_ops_test prism_gemm_nvidia_test; do
    echo "== $t"; PRISM_DEVICE=nvidia timeout 120 "$b/$t" --gtest_brief=1 2>&1 | tail -25; echo "exit ${PIPESTATUS[0]}"
  done
} > "$out/tests_nvidia.txt" 2>&1
PRISM_DEVICE=nvidia timeout 420 "$b/prism_op_suite" --gtest_brief=1 > "$out/ops_nvidia.txt" 2>&1; echo "exit $?" >> "$out/ops_nvidia.txt"
{
  PRISM_DEVICE=nvidia timeout 60 "$b/bench_dispatch" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
  PRISM_DEVICE=nvidia PRISM_GEMM_NO_BLAS=1 timeout 100 "$b/prism_bench_attention"
  PRISM_DEVICE=nvidia timeout 60 "$b/prism_bench_ops" --benchmark_filter='layer_norm|fused|rotary|embedding'
} > "$out/bench_nvidia.txt" 2>&1
wait
