#!/usr/bin/env bash
# A launch-bound PyTorch loop (tests/gpu/workloads/launch_bound.py: in-place
# adds on a 1-element tensor) bare and under gpulimit: with no limit, with
# only --mem, and as a lone tenant of a private gpulimitd with --weight.
# The four run in turn, ROUNDS times (each run the best of launch_bound's
# three repeats); prints each one's median microseconds per launch, its
# range over the rounds, and the median's ratio to bare. On the simulated
# GPU unless a real one is found; kernels then take no device time
# (FAKECUDA_KERNEL_NS=0), so the host's cost per launch is measured.
#
#   benchmarks/pytorch_launch_bound.sh [BUILD_DIR] [LAUNCHES] [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
launches=${2:-50000}
rounds=${3:-5}
python=$("$root/scripts/pytorch-venv.sh")/bin/python
work=$(mktemp -d)
trap 'kill "${server:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  export LD_LIBRARY_PATH=$build/fakecuda/lib FAKECUDA_STATE=$work/state FAKECUDA_KERNEL_NS=0 \
         FAKECUDA_KERNEL_NS_PER_WAVE=0 FAKECUDA_CTX_MEM=0
fi
export GPULIMIT_LIBRARY=$build/libintercept/libgpulimit.so GPULIMIT_LEDGER_DIR=$work/ledgers
mkdir -p "$GPULIMIT_LEDGER_DIR"
job=("$python" "$root/tests/gpu/workloads/launch_bound.py" --launches "$launches" --warmup 5000)
us() { "$@" | "$python" -c 'import json,sys; print("%.2f" % json.loads(sys.stdin.read().splitlines()[-1])["us_per_launch"])'; }

"$build/limiter-server/gpulimitd" --foreground --socket "$work/gpulimitd.sock" --idle-exit-s 600 \
  >"$work/gpulimitd.log" 2>&1 &
server=$!
sleep 1
: >"$work/results"
for ((round = 0; round < rounds; ++round)); do
  echo "bare $(us "${job[@]}")" >>"$work/results"
  echo "no-limit $(us "$build/tools/cli/gpulimit" --no-server -- "${job[@]}")" >>"$work/results"
  echo "--mem $(us "$build/tools/cli/gpulimit" --no-server --mem 8G -- "${job[@]}")" >>"$work/results"
  echo "--weight $(GPULIMIT_SOCKET=$work/gpulimitd.sock us "$build/tools/cli/gpulimit" --weight 2 -- "${job[@]}")" \
    >>"$work/results"
done
"$python" - "$work/results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, value = line.split()
    runs.setdefault(name, []).append(float(value))
bare = statistics.median(runs["bare"])
for name, values in runs.items():
    median = statistics.median(values)
    print("%-9s median %6.2f us/launch (%.2f to %.2f over %d rounds)  x%.3f"
          % (name, median, min(values), max(values), len(values), median / bare))
PY
