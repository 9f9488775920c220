#!/usr/bin/env bash
# The demo job (run by scripts/quickstart.sh once built): a job under a 4 GiB
# memory cap tries to take 8 GiB and stops at the cap; then two tenants with
# weights 3 and 1 share one GPU, both wanting it all the time for 4 seconds,
# and `gpulimit status` shows them. With PyTorch in the project's venv, the
# same twice more with PyTorch jobs: one filling a 2 GiB cap to PyTorch's
# out-of-memory error, two sharing the GPU by weight.
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

# PyTorch, when the project's venv has it (scripts/install-deps.sh makes it).
python=$(scripts/pytorch-venv.sh)/bin/python
if [[ -x $python ]] && "$python" -c 'import torch' 2>/dev/null; then
  echo "== PyTorch under gpulimit --mem 2G: what torch.cuda sees, then filling memory to PyTorch's OOM"
  marks=$(mktemp -d)
  touch "$marks/release"  # fill_and_hold.py lets go at once
  "$build_dir/tools/cli/gpulimit" --mem 2G -- \
    "$python" tests/pytorch/jobs/fill_and_hold.py "$marks/held" "$marks/release" |
    "$python" -c 'import json, sys
r = json.loads(sys.stdin.read().splitlines()[-1])
print("   torch.cuda.mem_get_info() total: %.2f GiB" % (r["total"] / 2**30))
print("   filling raised: " + r["oom_message"].splitlines()[0][:160])
print("   PyTorch had reserved %.2f GiB; after empty_cache() it allocated %.2f GiB again"
      % (r["reserved"] / 2**30, r["allocated_again"] / 2**30))'
  rm -rf "$marks"

  echo "== two PyTorch tenants by weight: gpulimit --weight 3 and --weight 1, 4 seconds"
  pytorch_env=()
  # 1 ms kernels, so that the GPU is the bottleneck; a trace of their own.
  $simulated && pytorch_env=(env FAKECUDA_KERNEL_NS=1000000 FAKECUDA_TRACE="$state_dir/pytorch.trace")
  "${pytorch_env[@]}" "$build_dir/tools/cli/gpulimit" --weight 3 -- \
    "$python" tests/pytorch/jobs/busy.py 4 >/dev/null &
  heavy=$!
  "${pytorch_env[@]}" "$build_dir/tools/cli/gpulimit" --weight 1 -- \
    "$python" tests/pytorch/jobs/busy.py 4 >/dev/null &
  light=$!
  sleep 4
  echo "== gpulimit status, while they run:"
  "$build_dir/tools/cli/gpulimit" status
  wait "$heavy"
  wait "$light"
  if $simulated; then
    echo "== what the simulated GPU ran while both did: pid $heavy has weight 3, pid $light weight 1"
    # From the later first kernel to the earlier last one, as tests/pytorch measures.
    read -r from to < <("$python" -c 'import sys
sys.path.insert(0, "tests/gpu/suite")
from section_shares import trace_window
print(*trace_window(sys.argv[1], {int(sys.argv[2]), int(sys.argv[3])}, 0))' \
      "$state_dir/pytorch.trace" "$heavy" "$light")
    "$build_dir/tools/trace/gpulimit-trace" "$state_dir/pytorch.trace" --from "$from" --to "$to" \
      --tenant "heavy=$heavy" --tenant "light=$light" --check-no-overlap
  fi
else
  echo "== no PyTorch in $(scripts/pytorch-venv.sh) (scripts/install-deps.sh makes it): PyTorch part skipped"
fi
