#!/usr/bin/env bash
# The real-GPU validation suite, one command: builds gpulimit (on a GPU
# machine), runs five sections, each under its own timeout, and writes
# OUTDIR/report.json and OUTDIR/summary.md. A section that fails or hangs is
# reported; the others still run. See tests/gpu/README.md.
#
#   tests/gpu/run.sh OUTDIR                         real GPU: build, then run
#   tests/gpu/run.sh --simulated --build-dir DIR OUTDIR
#                                                   the simulated GPU, with the
#                                                   programs of an existing build
set -uo pipefail

usage() {
  cat <<'EOF'
usage: tests/gpu/run.sh [--simulated] [--build-dir DIR] [--python PY]
                        [--deps-prefix DIR] [--budget-s SECONDS] OUTDIR

  --simulated        run on the simulated GPU (tests/fakecuda) with the programs
                     of an existing build (--build-dir, required); PyTorch parts
                     run when --python's torch works on the simulator
  --build-dir DIR    real GPU: where to build (default build-gpusuite-real; an
                     existing build there is reused); simulated: the build to use
  --python PY        the Python that has PyTorch (default python3)
  --deps-prefix DIR  a prefix holding build dependencies this machine lacks
                     (CLI11, nlohmann_json, spdlog, fmt, toml++, cpp-httplib),
                     default .deps if present
  --budget-s S       the whole run's time, build included (default 470)
EOF
}

root=$(cd "$(dirname "$0")/../.." && pwd)
suite_dir="$root/tests/gpu/suite"
simulated=false
build_dir=""
python_bin=python3
deps_prefix=""
budget_s=470
out=""
while (($#)); do
  case "$1" in
    --simulated) simulated=true ;;
    --build-dir) build_dir=${2:-}; shift ;;
    --python) python_bin=${2:-}; shift ;;
    --deps-prefix) deps_prefix=${2:-}; shift ;;
    --budget-s) budget_s=${2:-}; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *)
      if [[ -n $out ]]; then echo "run.sh: one OUTDIR only (got $out and $1)" >&2; exit 2; fi
      out=$1 ;;
  esac
  shift
done

# Everything is checked before anything is written.
if [[ -z $out ]]; then echo "run.sh: no OUTDIR given" >&2; usage >&2; exit 2; fi
if ! [[ $budget_s =~ ^[0-9]+$ ]] || ((budget_s < 60)); then
  echo "run.sh: --budget-s must be a whole number of seconds, at least 60 (got '$budget_s')" >&2
  exit 2
fi
if ! command -v python3 >/dev/null 2>&1; then echo "run.sh: python3 not found" >&2; exit 2; fi
if ! command -v "$python_bin" >/dev/null 2>&1; then
  echo "run.sh: --python $python_bin not found" >&2; exit 2
fi
if $simulated && [[ ! -f $build_dir/CMakeCache.txt ]]; then
  echo "run.sh: --simulated needs --build-dir DIR, an existing build of this repository" \
       "(got '${build_dir}')" >&2
  exit 2
fi
if ! $simulated; then
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "run.sh: no NVIDIA GPU here (nvidia-smi finds none); use --simulated --build-dir DIR" >&2
    exit 2
  fi
  build_dir=${build_dir:-$root/build-gpusuite-real}
  if [[ -z $deps_prefix && -d $root/.deps ]]; then deps_prefix=$root/.deps; fi
  if [[ -n $deps_prefix && ! -d $deps_prefix ]]; then
    echo "run.sh: --deps-prefix $deps_prefix is not a directory" >&2; exit 2
  fi
fi
[[ $build_dir = /* ]] || build_dir=$PWD/$build_dir

started=$(date +%s)
deadline=$((started + budget_s))
mkdir -p "$out" || { echo "run.sh: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
rm -rf "$out/sections" "$out/logs" "$out/work"
rm -f "$out/report.json" "$out/summary.md"
mkdir -p "$out/sections" "$out/logs" "$out/work"

say() { echo "gpusuite: $*"; }
left() { echo $((deadline - $(date +%s))); }
# The build's share of what is left: all but a minute, and never nothing.
build_time() { local t=$(($(left) - 60)); echo $((t < 30 ? 30 : t)); }

# --- the programs -----------------------------------------------------------

# Build-tree paths (the top-level build and tests/gpu/CMakeLists.txt agree).
library=$build_dir/libintercept/libgpulimit.so
gpulimit=$build_dir/tools/cli/gpulimit
gpulimitd=$build_dir/limiter-server/gpulimitd
trace_cli=$build_dir/tools/trace/gpulimit-trace
allocator=$build_dir/tests/workloads/allocator
spinner=$build_dir/tests/workloads/spinner
fakecuda_lib=$build_dir/fakecuda/lib
needed=("$library" "$gpulimit" "$gpulimitd" "$trace_cli" "$allocator" "$spinner")

missing_programs() {
  local missing=() path
  for path in "$@"; do [[ -e $path ]] || missing+=("${path#"$build_dir"/}"); done
  echo "${missing[*]}"
}

# Header-only and packaged dependencies a GPU machine may lack; nothing can
# be installed there, so say which and how to bring them.
check_build_dependencies() {
  local dirs=(/usr/include /usr/local/include) lacking=() header
  [[ -n $deps_prefix ]] && dirs+=("$deps_prefix/include")
  declare -A what=([CLI/CLI.hpp]="CLI11 (Debian: libcli11-dev)"
                   [nlohmann/json.hpp]="nlohmann_json (Debian: nlohmann-json3-dev)"
                   [spdlog/spdlog.h]="spdlog (Debian: libspdlog-dev)"
                   [fmt/core.h]="fmt (Debian: libfmt-dev)"
                   [toml++/toml.h]="toml++ (Debian: libtomlplusplus-dev)"
                   [httplib.h]="cpp-httplib (Debian: libcpp-httplib-dev)")
  for header in "${!what[@]}"; do
    local found=false dir
    for dir in "${dirs[@]}"; do [[ -f $dir/$header ]] && found=true; done
    $found || lacking+=("${what[$header]}")
  done
  for tool in cmake ninja c++ pkg-config; do command -v $tool >/dev/null 2>&1 || lacking+=("$tool"); done
  if [[ ! -x ${CUDAToolkit_ROOT:-/usr/local/cuda}/bin/nvcc ]] && ! command -v nvcc >/dev/null 2>&1; then
    lacking+=("nvcc (the CUDA toolkit)")
  fi
  if ((${#lacking[@]})); then
    echo "missing build dependencies: $(IFS=';'; echo "${lacking[*]}"). Bring their headers" \
         "and CMake packages under a prefix and pass --deps-prefix DIR (default: .deps)"
  fi
}

build_status="not built"
build_failed=false
tracer_status="not built"
build() {
  # The check looks in the usual places only; CMake has the last word.
  local problem
  problem=$(check_build_dependencies)
  [[ -n $problem ]] && say "$problem"
  local configure=()
  if [[ ! -f $build_dir/build.ninja ]]; then
    configure=(cmake -S "$root/tests/gpu" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release)
    if [[ -n $deps_prefix ]]; then
      configure+=("-DCMAKE_PREFIX_PATH=$deps_prefix" "-DCMAKE_INCLUDE_PATH=$deps_prefix/include")
    fi
    command -v ccache >/dev/null 2>&1 &&
      configure+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
    say "configuring $build_dir"
    if ! timeout "$(build_time)" "${configure[@]}" >"$out/logs/configure.log" 2>&1; then
      # The package CMake could not find, when that is what stopped it.
      local lacking
      lacking=$(grep -o -E 'provided by "[^"]+"|No package .[^ ]+. found|[A-Za-z0-9_]+-NOTFOUND' \
                "$out/logs/configure.log" | sort -u | tr '\n' ' ')
      build_status="failed: cmake configure (${lacking:-$(grep -m1 -A2 'Error' "$out/logs/configure.log" |
                    tr '\n' ' ' | cut -c1-300)}; logs/configure.log)${problem:+; $problem}"
      say "$build_status"
      return 1
    fi
  fi
  local targets=(gpulimit_intercept gpulimit_cli gpulimitd gpulimit_trace_cli allocator spinner)
  say "building ${targets[*]} in $build_dir"
  if ! timeout "$(build_time)" cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}" \
      >"$out/logs/build.log" 2>&1; then
    build_status="failed: cmake --build ($( (grep -i -m1 -B1 -A3 'error' "$out/logs/build.log" ||
                  tail -n 3 "$out/logs/build.log") | tr '\n' ' ' | cut -c1-300); logs/build.log)"
    say "$build_status"
    return 1
  fi
  # The CUPTI tracer, when this tree has it (tools/cupti-trace): its targets
  # by name, tests left out. Optional: without it the shares have no ground
  # truth, and the suite says so.
  local tracer=() target
  for target in $(cmake --build "$build_dir" --target help 2>/dev/null |
                  sed -n 's/^\([A-Za-z0-9_.+-]*cupti[A-Za-z0-9_.+-]*\): .*/\1/p' |
                  grep -v -e test -e '\.o$' -e '\.i$' -e '\.s$' | sort -u); do
    tracer+=("$target")
  done
  tracer_status="not in this tree"
  if ((${#tracer[@]})); then
    say "building the CUPTI tracer: ${tracer[*]}"
    if timeout "$(build_time)" cmake --build "$build_dir" -j "$(nproc)" --target "${tracer[@]}" \
        >"$out/logs/build-tracer.log" 2>&1; then
      tracer_status="built"
    else
      tracer_status="did not build (logs/build-tracer.log)"
      say "the CUPTI tracer $tracer_status"
    fi
  fi
  build_status="built ($(($(date +%s) - started)) s; CUPTI tracer: $tracer_status)"
}

if $simulated; then
  gone=$(missing_programs "${needed[@]}" "$fakecuda_lib/libcuda.so.1")
  if [[ -n $gone ]]; then
    build_status="missing in $build_dir: $gone"
  else
    build_status="existing build $build_dir"
  fi
else
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1
  build || build_failed=true
fi
cupti_trace=""
if [[ $tracer_status == built ]]; then
  cupti_trace=$(find "$build_dir" -name gpulimit-cupti-trace -type f -perm -u+x 2>/dev/null | head -n 1)
fi

export GPUSUITE_MODE=$($simulated && echo simulated || echo real)
export GPUSUITE_ROOT=$root GPUSUITE_OUT=$out GPUSUITE_WORK=$out/work GPUSUITE_BUILD=$build_dir
export GPUSUITE_GPULIMIT=$gpulimit GPUSUITE_GPULIMITD=$gpulimitd GPUSUITE_LIBRARY=$library
export GPUSUITE_ALLOCATOR=$allocator GPUSUITE_SPINNER=$spinner GPUSUITE_TRACE_CLI=$trace_cli
export GPUSUITE_CUPTI_TRACE=$cupti_trace GPUSUITE_PYTHON=$python_bin GPUSUITE_STARTED=$started
export GPUSUITE_BUILD_STATUS=$build_status
GPUSUITE_COMMIT=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -n $(git -C "$root" status --porcelain 2>/dev/null | head -n 1) ]] && GPUSUITE_COMMIT+=" (with uncommitted changes)"
export GPUSUITE_COMMIT
$simulated && export GPUSUITE_FAKECUDA_LIB=$fakecuda_lib
export PYTHONDONTWRITEBYTECODE=1

# --- the sections -----------------------------------------------------------

placeholder() {  # NAME STATUS MESSAGE
  python3 "$suite_dir/write_report.py" --placeholder "$1" "$2" "$3" >"$out/sections/$1.json"
}

# run_section NAME BUDGET_S ARGS...: the section's script under a timeout of
# its budget (less when the run's deadline is nearer), its JSON line kept.
run_section() {
  local name=$1 budget=$2; shift 2
  local seconds=$(( $(left) - 15 ))
  ((seconds > budget)) && seconds=$budget
  if ((seconds < 20)); then
    placeholder "$name" skipped "skipped: out of time (the run's budget is ${budget_s} s)"
    say "$name: skipped, out of time"
    return
  fi
  say "$name: running (at most ${seconds} s)"
  timeout --kill-after=10 "$seconds" python3 "$suite_dir/section_$name.py" \
    --deadline-s $((seconds - 10)) "$@" >"$out/sections/$name.json" 2>"$out/logs/$name.log"
  local status=$?
  if ((status == 124 || status == 137)); then
    placeholder "$name" timeout "timed out after ${seconds} s (logs/$name.log)"
  elif ((status != 0)) || ! grep -q '"section"' "$out/sections/$name.json"; then
    placeholder "$name" error "exit $status: $(tail -n 3 "$out/logs/$name.log" | tr '\n' ' ' |
                                cut -c1-400) (logs/$name.log)"
  fi
  say "$name: $(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["status"])' \
                "$out/sections/$name.json" 2>/dev/null)"
}

$simulated && needed+=("$fakecuda_lib/libcuda.so.1")
programs_missing=$(missing_programs "${needed[@]}")
torch_ok=false
torch_note="skipped: no GPU / no torch"
if $build_failed || [[ -n $programs_missing ]]; then
  # Programs left by an earlier build are not what this tree would build.
  for name in workloads memcap overhead priority shares; do
    placeholder "$name" error "not run: ${programs_missing:+the build has no $programs_missing; }$build_status"
  done
else
  # On the simulated GPU the check runs on the simulator, as the sections do.
  torch_check_env=()
  if $simulated; then
    torch_check_env=(env LD_LIBRARY_PATH="$fakecuda_lib" FAKECUDA_STATE="$out/logs/torch-check.state")
  fi
  if timeout 120 "${torch_check_env[@]}" "$python_bin" \
      -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)' \
      >"$out/logs/torch-check.log" 2>&1; then
    torch_ok=true
  else
    torch_note="skipped: no GPU / no torch ($python_bin cannot use torch.cuda; logs/torch-check.log)"
  fi
  rm -f "$out/logs/torch-check.state"
  say "mode $GPUSUITE_MODE, PyTorch: $torch_ok, CUPTI tracer: ${cupti_trace:-none}"

  # Cheapest and most basic first; shares, the longest, last.
  if $simulated; then
    run_section workloads 200 --workers 2
  else
    run_section workloads 60 --workers 4
  fi
  if $torch_ok; then
    run_section memcap 45
    if $simulated; then
      # The simulator runs a training step about ten times slower than an
      # H200 (its host does every launch's bookkeeping): fewer steps, so
      # that all five runs and the launch-bound pair fit.
      run_section overhead 150 --steps 40 --launches 20000
    else
      run_section overhead 75
    fi
    run_section priority 40
    if $simulated; then
      # Four scenarios of PyTorch tenants, 10 s each (on the simulator a
      # turn is tens of milliseconds: shares are counted in turns), take
      # about a minute and a half here (section_shares.py says what else
      # the simulated run changes).
      run_section shares 300 --torch --seconds 10
    else
      run_section shares 120 --torch --seconds 6
    fi
  else
    for name in memcap overhead priority; do placeholder "$name" skipped "$torch_note"; done
    run_section shares 150 --seconds 5.6
  fi
fi

# What is left in work/ is for reading afterwards: the simulator's state
# files are not, and kernel traces shrink tenfold compressed.
find "$out/work" -type f -name state -delete 2>/dev/null
find "$out/work" -type f -name '*.trace' -size +1M -exec gzip -q {} + 2>/dev/null

python3 "$suite_dir/write_report.py" "$out" || { echo "run.sh: no report written" >&2; exit 2; }
say "report: $out/report.json, $out/summary.md"
status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$out/report.json")
[[ $status == fail ]] && exit 1
exit 0
