#!/usr/bin/env bash
# Prints the path of the project's PyTorch venv: $GPULIMIT_VENV when set,
# otherwise ~/.cache/gpulimit/venv, outside the work tree so that every
# clone on this machine shares it. scripts/install-deps.sh makes it; the
# build (tests/pytorch/CMakeLists.txt) and the quick start use it.
set -euo pipefail
echo "${GPULIMIT_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/gpulimit/venv}"
