#!/usr/bin/env bash
# prism's main job: installs the dependencies, builds, and shows prism at work on this machine's
# OpenCL devices: the device table, then a sample kernel program (examples/consumer: SAXPY
# through buffers and accessors, verified on the host). PRISM_DEVICE picks the device.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${PRISM_BUILD_DIR:-$root/build}
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"

echo
echo "== prism devices"
"$build/bin/prism" devices

echo
echo "== sample kernel program (examples/consumer)"
"$build/bin/prism_consumer"

# --- demo steps of other parts go below this line ---
