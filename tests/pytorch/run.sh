#!/usr/bin/env bash
# One ctest of the label pytorch: runs one test file of tests/pytorch with
# pytest, in the project's PyTorch venv, against the build BUILD_DIR.
#
#   tests/pytorch/run.sh PYTHON BUILD_DIR TEST_FILE [pytest arguments]
#
# The venv is made by scripts/install-deps.sh. Without it the test fails
# with one line saying so: the PyTorch tests never skip silently.
set -uo pipefail
if (($# < 3)); then echo "usage: $0 PYTHON BUILD_DIR TEST_FILE [pytest args]" >&2; exit 2; fi
python=$1 build_dir=$2 test_file=$3
shift 3
if ! "$python" -c 'import torch, pytest' 2>/dev/null; then
  echo "pytorch tests: no PyTorch at $python (run scripts/install-deps.sh, which makes the venv)"
  exit 1
fi
cd "$(dirname "$0")"
export GPULIMIT_BUILD_DIR=$build_dir
exec "$python" -m pytest -q -p no:cacheprovider -o console_output_style=classic \
  --basetemp="$(mktemp -d "${TMPDIR:-/tmp}/gpulimit-pytorch.XXXXXX")" "$test_file" "$@"
