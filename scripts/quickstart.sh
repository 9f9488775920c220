#!/usr/bin/env bash
# From a fresh clone: installs the dependencies, builds, and runs the demo
# job: two processes sharing one GPU, each allocating memory and running
# kernels. On a machine with an NVIDIA GPU it uses the real driver; otherwise
# the simulated one, and then shows from the simulator's kernel trace how the
# two processes took turns on the device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec scripts/demo.sh
