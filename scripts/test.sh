#!/usr/bin/env bash
# Builds gpulimit (incrementally) and runs the whole test suite on the
# simulated GPU. Arguments go to ctest, e.g. `scripts/test.sh -L fakecuda`
# or `scripts/test.sh -R Memory`.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${GPULIMIT_BUILD_DIR:-build}
scripts/build.sh
ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" "$@"
