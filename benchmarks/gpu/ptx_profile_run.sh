#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine (bundle carried, CUDA toolkit installed): dumps the PTX of linear's M = 1
# quantized GEMV (PRISM_DUMP_PROGRAMS, nvidia route config unless QCONFIG says otherwise), runs
# it through ptx_profile.cu's CUDA launches beside a plain read of the same bytes, and profiles
# both with Nsight Compute into $OUT. QTYPES (default "q4_0 q8_0"), N, K, NB, WARPS as the route.
set -u
source benchmarks/gpu/bundle_env.sh
CUDA=${CUDA:-/usr/local/cuda}
N=${N:-16384} K=${K:-4096} NB=${NB:-4} WARPS=${WARPS:-8}
QCONFIG=${QCONFIG:-variant=4,mb=1,nb=$NB,warps=$WARPS,qa=1,qp=3}
L=$OUT/ptx_profile.txt
$CUDA/bin/nvcc -O2 -arch=sm_90 -o /tmp/ptx_profile benchmarks/gpu/ptx_profile.cu -lcuda >> "$L" 2>&1 ||
  exit 1
run=()
for t in ${QTYPES:-q4_0 q8_0}; do
  case $t in
    q8_0) qb=34 ;; q4_0) qb=18 ;; q4_1) qb=20 ;;
    *) echo "unknown QTYPES entry '$t' (q8_0, q4_0 or q4_1)" >> "$L"; exit 2 ;;
  esac
  D=$(mktemp -d)
  PRISM_DEVICE=nvidia PRISM_DUMP_PROGRAMS=$D PRISM_BENCH_QACT=bf16 PRISM_BENCH_QKEY=m=1,n=$N,k=$K \
    PRISM_BENCH_QCONFIG="$QCONFIG" PRISM_BENCH_DEVICE_TIME=1 PRISM_BENCH_PIPELINE=20 \
    PRISM_BENCH_MIN_TIME=0.01 PRISM_BENCH_LLC_BYTES=52428800 \
    timeout 60 "$G/bin/prism_bench_quant" --benchmark_filter="$t" 2>&1 |
    grep -E "^linear_gemv" | cut -c1-160 >> "$L"
  ptx=$(grep -l QL_K "$D"/*.options | head -1)
  [ -n "$ptx" ] || { echo "$t: no QL_K program in the dump" >> "$L"; rm -rf "$D"; continue; }
  tr -d '\000' < "${ptx%.options}.bin" > "$OUT/$t.ptx"
  rm -rf "$D"
  /tmp/ptx_profile "$OUT/$t.ptx" $qb $N $K $NB $WARPS 20 >> "$L" 2>&1
  run=(/tmp/ptx_profile "$OUT/$t.ptx" $qb $N $K $NB $WARPS 6)
  timeout 200 $CUDA/bin/ncu --set full -k gemm_q_blocks_i8 -s 4 -c 1 "${run[@]}" > "$OUT/ncu_$t.txt" 2>&1
  stalls=regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,dram__bytes_read.sum
  timeout 100 $CUDA/bin/ncu --metrics $stalls -k gemm_q_blocks_i8 -s 4 -c 1 "${run[@]}" \
    > "$OUT/stalls_$t.txt" 2>&1
done
# The read of the last type's bytes.
[ ${#run[@]} -gt 0 ] &&
  timeout 100 $CUDA/bin/ncu --set full -k read16 -s 4 -c 1 "${run[@]}" > "$OUT/ncu_read16.txt" 2>&1
echo "done $SECONDS" >> "$L"
