#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the checkout root with the bundle (.gpu) carried: the GEMM harness over
# a plan, cuBLAS through PyTorch on the same shapes back to back, prism's GEMM benchmark through
# dispatch, and the GEMM tests / op suite on NVIDIA. Usage: device_run.sh OUTDIR PLAN [STEPS]
# STEPS: letters h (harness) t (torch) b (bench) g (gemm tests) o (op suite, OPS_FILTER a gtest
# filter); default htbgo.
# The bundle, made on the build machine from the repo root (.gpu git-ignored):
#   ../shared/gpu/bundle.sh .gpu build/bin/{prism,prism_bench_gemm,prism_op_suite,prism_gemm_ops_test,prism_gemm_nvidia_test}
#   xz .gpu/lib/libopenblas.so.0          # optional, keeps the bundle near 20 MiB
#   mkdir -p .gpu/h/kernels .gpu/h/bench .gpu/data && cp build/bin/prism_gemm_harness .gpu/h/gemm_harness
#   cp kernels/cl/*.cl .gpu/h/kernels/ && cp benchmarks/gpu/{torch_gemm.py,device_run.sh} PLAN .gpu/h/bench/
#   cp -r vendors .gpu/data/              # the vendor profiles this build expects
set -u
out=$1 plan=$2 steps=${3:-htbgo}
G=$PWD/.gpu
[ -f "$G/lib/libopenblas.so.0.xz" ] && python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$G/lib/libopenblas.so.0.xz" "$G/lib/libopenblas.so.0"
source "$G/env.sh"
export PRISM_DATA_DIR=$G/data PRISM_TUNING_DB=/tmp/prism-tuning.db HARNESS_VERBOSE=1 HARNESS_MS=${HARNESS_MS:-200}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$out/gpu_state.txt" 2>&1
case $steps in *h*) timeout 330 "$G/h/gemm_harness" "$G/h/kernels" "$plan" > "$out/harness.txt" 2>&1; echo "harness exit $?" >> "$out/harness.txt";; esac
case $steps in *t*) PYTHONUNBUFFERED=1 timeout 120 python3 "$G/h/bench/torch_gemm.py" > "$out/torch.txt" 2>&1;; esac
case $steps in *b*) PRISM_DEVICE=nvidia PRISM_GEMM_NO_BLAS=1 timeout 150 "$G/bin/prism_bench_gemm" > "$out/bench_gemm.txt" 2>&1; echo "exit $?" >> "$out/bench_gemm.txt";; esac
case $steps in *g*) for t in prism_gemm_nvidia_test prism_gemm_ops_test; do echo "== $t"; PRISM_DEVICE=nvidia timeout 150 "$G/bin/$t" --gtest_brief=1 2>&1 | tail -30; echo "exit ${PIPESTATUS[0]}"; done > "$out/tests.txt" 2>&1;; esac
case $steps in *o*) PRISM_DEVICE=nvidia timeout ${OPS_TIMEOUT:-240} "$G/bin/prism_op_suite" --gtest_brief=1 --gtest_filter="${OPS_FILTER:-*}" > "$out/ops_nvidia.txt" 2>&1; echo "exit $?" >> "$out/ops_nvidia.txt";; esac
true
