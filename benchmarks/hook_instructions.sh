#!/usr/bin/env bash
# Instructions per cuLaunchKernel, direct and hooked, on the simulated driver,
# counted with callgrind. Usage: benchmarks/hook_instructions.sh [build dir]
set -euo pipefail
build=${1:-build}
program="$build/benchmarks/hook_instructions"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
count() {
  FAKECUDA_STATE="$state/state" valgrind --tool=callgrind --collect-atstart=no \
    --toggle-collect=launch_loop --callgrind-out-file="$state/out.$1" "$program" "$1" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
direct=$(count direct)
hooked=$(count hooked)
echo "instructions per call over 10000 calls: direct $((direct / 10000)), hooked $((hooked / 10000)), added $(((hooked - direct) / 10000))"
