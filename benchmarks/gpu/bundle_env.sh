# SPDX-License-Identifier: Apache-2.0
# Sourced by the GPU-machine scripts, from the repository root with the bundle (.gpu, made by
# ../shared/gpu/bundle.sh) carried: sets G to the bundle, unpacks its xz-packed OpenBLAS when the
# bundle has one, points the OpenCL loader at the bundle (its env.sh) and prism at the vendor
# profiles the build expects (.gpu/data/vendors).
G=$PWD/.gpu
# Unpacked once, into a temporary name then renamed: scripts that run side by side (op_suite_
# sharded.sh's shards) source this too, and a library rewritten under a running program kills it.
[ -f "$G/lib/libopenblas.so.0.xz" ] && [ ! -f "$G/lib/libopenblas.so.0" ] &&
  python3 -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
    "$G/lib/libopenblas.so.0.xz" "$G/lib/libopenblas.so.0.$$" && mv "$G/lib/libopenblas.so.0.$$" "$G/lib/libopenblas.so.0"
source "$G/env.sh"
export PRISM_DATA_DIR=$G/data
# Tests that spawn the prism CLI (tuning_dispatch_tests' kill -9 test, the Python suites) take
# the bundle's instead of their build-tree path.
[ -x "$G/bin/prism" ] && export PRISM_CLI=$G/bin/prism
true
