#!/usr/bin/env bash
# Instructions per cuLaunchKernel, direct and hooked, on the simulated driver,
# counted with callgrind. Usage: benchmarks/hook_instructions.sh [build dir]
#
# "gated" is the hook in a process attached to a stand-in gpulimitd that
# holds the token (the launch gate's fast path). The simulator's own count
# per call differs a little from process to process, so the hook's cost is
# also given without the driver: the loop and the hook, minus the loop alone.
set -euo pipefail
build=${1:-build}
program="$build/benchmarks/hook_instructions"
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
# Prints the instructions collected in launch_loop, then those inside the
# driver's cuLaunchKernel.
count() {
  local total driver
  total=$(FAKECUDA_STATE="$state/state" valgrind --tool=callgrind --collect-atstart=no \
    --toggle-collect=launch_loop --callgrind-out-file="$state/out.$1" "$program" "$1" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
  driver=$(callgrind_annotate --inclusive=yes "$state/out.$1" |
    awk '/libcuda\.so\.1\]/ && /:cuLaunchKernel / && !found {gsub(",", "", $1); print $1; found = 1}')
  echo "$total ${driver:-0}"
}
read -r direct direct_driver < <(count direct)
read -r hooked hooked_driver < <(count hooked)
read -r gated gated_driver < <(count gated)
echo "instructions per call over 10000 calls: direct $((direct / 10000)), hooked $((hooked / 10000)), added $(((hooked - direct) / 10000))"
echo "gated, holding the token: $((gated / 10000)), added $(((gated - direct) / 10000))"
outside() { echo $((($1 - $2 - direct + direct_driver) / 10000)); }
echo "the hook alone, without the driver: hooked $(outside "$hooked" "$hooked_driver"), gated $(outside "$gated" "$gated_driver")"
