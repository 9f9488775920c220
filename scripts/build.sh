#!/usr/bin/env bash
# Configures and builds gpulimit into build/ (or $GPULIMIT_BUILD_DIR).
# Extra arguments go to CMake's configure step, e.g. -DGPULIMIT_SANITIZE=thread.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${GPULIMIT_BUILD_DIR:-build}
generator=()
if [[ ! -f "$build_dir/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
cmake -S . -B "$build_dir" "${generator[@]}" "$@"
cmake --build "$build_dir" --parallel "$(nproc)"
