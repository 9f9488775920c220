#!/usr/bin/env bash
# The demo job (run by scripts/quickstart.sh once built): a job under a 4 GiB
# memory cap tries to take 8 GiB and stops at the cap; then two tenants with
# weights 3 and 1 share one GPU, both wanting it all the time for 4 seconds,
# and `gpulimit status` shows them.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${GPULIMIT_BUILD_DIR:-build}
workloads="$build_dir/tests/workloads"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "== real GPU: $(nvidia-smi -L | head -n 1)"
  simulated=false
else
  echo "== no NVIDIA GPU here: using the simulated GPU (tests/fakecuda)"
  simulated=true
  state_dir=$(mktemp -d)
  trap 'rm -rf "$state_dir"' EXIT
  export LD_LIBRARY_PATH="$PWD/$build_dir/fakecuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export FAKECUDA_STATE="$state_dir/state" FAKECUDA_TRACE="$state_dir/trace" FAKECUDA_MEM=16G
fi

echo "== gpulimit --mem 4G: the job asks for 8 GiB in 512 MiB chunks, frees, asks again"
"$build_dir/tools/cli/gpulimit" --mem 4G -- \
  "$workloads/allocator" --path linear --target 8G --chunk 512M --retry |
  tr ' ' '\n' | grep -E '^(total|bytes|error|free_after_free|retry_bytes)='

echo "== two tenants share the GPU by weight: gpulimit --weight 3 and --weight 1"
echo "   (gpulimit starts gpulimitd, the token server, when none is running)"
"$build_dir/tools/cli/gpulimit" --weight 3 -- \
  "$workloads/spinner" --launch kernel --kernel-ns 1000000 --seconds 4 >/dev/null &
heavy=$!
"$build_dir/tools/cli/gpulimit" --weight 1 -- \
  "$workloads/spinner" --launch graph-capture --batch 4 --kernel-ns 1000000 --seconds 4 >/dev/null &
light=$!
sleep 2
echo "== gpulimit status, while they run:"
"$build_dir/tools/cli/gpulimit" status
wait "$heavy"
wait "$light"

if $simulated; then
  echo "== what the simulated GPU ran (tools/trace): pid $heavy has weight 3, pid $light weight 1"
  "$build_dir/tools/trace/gpulimit-trace" "$FAKECUDA_TRACE" --check-no-overlap
fi
