#!/usr/bin/env bash
# What a CUDA runtime call costs the host, bare and under gpulimit: builds
# benchmarks/runtime/runtime_call_cost.cu with nvcc (shared cudart), then
# runs it bare, under `gpulimit --no-server`, under `--no-server --mem 8G`
# and as a lone tenant of a private gpulimitd with `--weight 2`, ROUNDS
# times in turn; prints each call's median ns per call per variant and its
# ratio to bare. On the simulated GPU unless a real one is found; kernels
# then take no device time (FAKECUDA_KERNEL_NS=0).
#
#   benchmarks/runtime_call_cost.sh [BUILD_DIR] [ITERATIONS] [ROUNDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
iterations=${2:-200000}
rounds=${3:-5}
nvcc=${CUDAToolkit_ROOT:-/usr/local/cuda}/bin/nvcc
work=$(mktemp -d)
trap 'kill "${server:-}" 2>/dev/null || true; rm -rf "$work"' EXIT
"$nvcc" -std=c++17 -O2 -cudart shared -Xlinker -rpath -Xlinker "$(dirname "$nvcc")/../lib64" \
  -o "$work/runtime_call_cost" "$root/benchmarks/runtime/runtime_call_cost.cu"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  export LD_LIBRARY_PATH=$build/fakecuda/lib FAKECUDA_STATE=$work/state FAKECUDA_KERNEL_NS=0 \
         FAKECUDA_KERNEL_NS_PER_WAVE=0 FAKECUDA_CTX_MEM=0
fi
export GPULIMIT_LIBRARY=$build/libintercept/libgpulimit.so GPULIMIT_LEDGER_DIR=$work/ledgers
mkdir -p "$GPULIMIT_LEDGER_DIR"
program=("$work/runtime_call_cost" "$iterations" 3)
"$build/limiter-server/gpulimitd" --foreground --socket "$work/gpulimitd.sock" --idle-exit-s 600 \
  >"$work/gpulimitd.log" 2>&1 &
server=$!
sleep 1
: >"$work/results"
label() { sed "s/^/$1 /" >>"$work/results"; }
for ((round = 0; round < rounds; ++round)); do
  "${program[@]}" | label bare
  "$build/tools/cli/gpulimit" --no-server -- "${program[@]}" | label no-limit
  "$build/tools/cli/gpulimit" --no-server --mem 8G -- "${program[@]}" | label --mem
  GPULIMIT_SOCKET=$work/gpulimitd.sock "$build/tools/cli/gpulimit" --weight 2 -- "${program[@]}" |
    label --weight
done
python3 - "$work/results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    variant, call, ns = line.split()
    runs.setdefault(call, {}).setdefault(variant, []).append(float(ns))
for call, variants in runs.items():
    bare = statistics.median(variants["bare"])
    print(call)
    for variant, values in variants.items():
        median = statistics.median(values)
        print("  %-9s median %8.1f ns (%.1f to %.1f over %d rounds)  x%.2f"
              % (variant, median, min(values), max(values), len(values), median / bare))
PY
