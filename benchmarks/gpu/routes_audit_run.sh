#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# On the GPU machine, from the checkout root with the bundle (.gpu) carried: issue 12 item 4's
# audit (benchmarks/tuning/routes_audit.sh) over several jobs within one device call, each job
# capped by its own timeout so that one slow set does not cost the others' results.
#
# Usage: routes_audit_run.sh OUTDIR JOB...
#   JOB = DEVICE:PRESETS:DTYPES:SETS:MAX_CANDIDATES:BUDGET_S:TIMEOUT_S[:QUANT]
#   PRESETS / DTYPES / SETS are comma-separated ("none" for no presets or no shape files);
#   DEVICE is prism's PRISM_DEVICE (nvidia, pocl).
# Each job writes OUTDIR/JOBNO-DEVICE/{audit.md,*.log}, packed at the end into OUTDIR/jobs.tar.xz
# (a device call returns few files); OUTDIR/jobs.txt has each job's wall time and exit status and
# OUTDIR/verdicts.txt each set's verdict line.
# The bundle, made on the build machine from the repo root (.gpu git-ignored):
#   ../shared/gpu/bundle.sh .gpu build/bin/{prism,prism-llm,prism_bench_tuning}
#   mkdir -p .gpu/data && cp -r vendors .gpu/data/ && (cd .gpu/lib && xz -T1 -0 libopenblas.so.0)
set -u
out=$1
shift
source benchmarks/gpu/bundle_env.sh
export BIN=$G/bin
n=0
for job in "$@"; do
  n=$((n + 1))
  IFS=: read -r dev presets dtypes sets maxc budget tmo quant <<< "$job"
  dir="$out/$n-$dev"
  mkdir -p "$dir"
  [ "$sets" = none ] || sets=$(echo "$sets" | tr , ' ')
  t0=$(date +%s)
  PRISM_DEVICE=$dev PRESETS="${presets//,/ }" DTYPES="${dtypes//,/ }" SETS="$sets" MAX_CANDIDATES=$maxc \
    BUDGET_S=$budget QUANT=${quant:-} timeout "$tmo" bash benchmarks/tuning/routes_audit.sh "$dir" \
    > "$dir/stderr.txt" 2>&1
  rc=$?
  echo "job $n [$job]: exit $rc in $(($(date +%s) - t0)) s" >> "$out/jobs.txt"
  rm -f "$dir"/*.db "$dir"/*.db-wal "$dir"/*.db-shm
done
grep -h "issue 12 item 4" "$out"/*-*/*.log > "$out/verdicts.txt" 2>/dev/null
(cd "$out" && tar cJf jobs.tar.xz --exclude=jobs.tar.xz ./*-*/ && rm -rf ./*-*/)
true
