#!/usr/bin/env bash
# The ctest `gpusuite_simulated` (label gpusuite): keeps run.sh from rotting
# on machines without a GPU. Runs the suite on the simulated GPU with the
# programs of BUILD_DIR, checks the report it writes (suite/check_report.py),
# and compiles every Python file of the suite (PyTorch is absent here, so the
# PyTorch workloads are only checked to be valid Python).
#
#   tests/gpu/ctest_simulated.sh BUILD_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if (($# != 1)); then echo "usage: $0 BUILD_DIR" >&2; exit 2; fi
build_dir=$1
out=$(mktemp -d "${TMPDIR:-/tmp}/gpusuite.XXXXXX")
trap 'rm -rf "$out"' EXIT

status=0
PYTHONPYCACHEPREFIX="$out/pycache" python3 -m py_compile "$here"/suite/*.py "$here"/workloads/*.py ||
  { echo "ctest_simulated: a Python file does not compile"; status=1; }

"$here/run.sh" --simulated --build-dir "$build_dir" "$out/report"
run_status=$?
# 1 is "a figure missed its goal", for check_report to judge; 2 is a run
# that could not start or write its report.
if ((run_status != 0 && run_status != 1)); then
  echo "ctest_simulated: run.sh exited $run_status"
  status=1
fi
cat "$out/report/summary.md" 2>/dev/null
python3 "$here/suite/check_report.py" "$out/report" || status=1
if ((status != 0)); then
  for log in "$out"/report/logs/*.log; do
    [[ -s $log ]] && { echo "== $log"; tail -n 20 "$log"; }
  done
fi
exit $status
