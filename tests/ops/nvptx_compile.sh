#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kernel paths that only NVIDIA's OpenCL builds (inline-PTX warp shuffles: PoCL, which runs the op
# suite in CI, never compiles them) compiled for NVIDIA's target by clang's nvptx backend, so that
# an edit that breaks them fails here and not first on a GPU machine. Each line of the list names
# a kernel file, an instruction its PTX must contain, and the options the host passes on NVIDIA
# (`PRISM_DUMP_PROGRAMS` on an NVIDIA device writes them beside each program). The source is
# prelude.cl and the file, as build_kernel joins them; clang spells inline assembly `__asm__`.
# usage: nvptx_compile.sh CLANG KERNELS_DIR LIST WORK_DIR
set -euo pipefail
clang=$1
kernels=$2
list=$3
work=$4
mkdir -p "$work"
n=0
failed=0
while read -r file want options; do
  [[ -z $file || $file == \#* ]] && continue
  n=$((n + 1))
  src="$work/$n.cl"
  cat "$kernels/prelude.cl" "$kernels/$file" > "$src"
  # shellcheck disable=SC2086  # the options are words
  if ! "$clang" -x cl -cl-std=CL1.2 -target nvptx64-nvidia-nvcl -O2 -S -Dasm=__asm__ -I "$kernels" \
    $options -DPRISM_CPU=0 "$src" -o "$work/$n.ptx" 2> "$work/$n.err"; then
    echo "FAIL $n: $file $options"
    head -20 "$work/$n.err"
    failed=$((failed + 1))
  elif ! grep -q -- "$want" "$work/$n.ptx"; then
    echo "FAIL $n: $file $options: its PTX has no $want"
    failed=$((failed + 1))
  else
    echo "ok   $n: $file ($(grep -c -- "$want" "$work/$n.ptx") $want) $options"
  fi
done < "$list"
if ((n == 0)); then
  echo "no programs listed in $list"
  exit 1
fi
echo "$((n - failed)) of $n programs built for nvptx64"
((failed == 0))
