#!/usr/bin/env bash
# Builds gpulimit under the sanitizers and runs the suite under them, each
# in a build directory of its own:
#
#   asan              build-asan: GPULIMIT_SANITIZE=address,undefined, every test
#                     that can run under it (see asan_unsupported_* below)
#   tsan              build-tsan: GPULIMIT_SANITIZE=thread, every test that
#                     can run under it (see tsan_unsupported_* below)
#   tsan-concurrency  build-tsan: GPULIMIT_SANITIZE=thread, only what the
#                     concurrency suites need (ctest label concurrency: the
#                     ledger, the launch gate, gpulimitd, time-slicing); CI's
#
#   scripts/test-sanitizers.sh [asan] [tsan] [tsan-concurrency] [-- CTEST_ARGS...]
#
# Without a suite named, asan then tsan. Builds are incremental and run
# under `nice`. $GPULIMIT_ASAN_BUILD_DIR and $GPULIMIT_TSAN_BUILD_DIR
# choose other directories. Under TSan every process a test starts writes
# its reports to <build>/tsan-reports/ (TSAN_OPTIONS log_path), and the
# suite fails when any is there, whatever the tests made of the process's
# exit. Prints how long each build and each run took.
set -euo pipefail
cd "$(dirname "$0")/.."

suites=()
ctest_args=()
while (($#)); do
  case $1 in
    asan | tsan | tsan-concurrency) suites+=("$1") ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "usage: $0 [asan] [tsan] [tsan-concurrency] [-- CTEST_ARGS...]" >&2; exit 2 ;;
  esac
  shift
done
((${#suites[@]})) || suites=(asan tsan)

# The test programs of the concurrency suites; what they run is built with
# them (add_dependencies).
concurrency_targets=(ledger_integration_test launch_gate_test server_integration_test
                     timeslice_integration_test)

# What cannot run under ThreadSanitizer (the README's build section says
# why): programs not built with it that load a TSan-built library with
# dlopen (Python with PyTorch, slurmd with the SPANK plugin: the runtime's
# static TLS refuses); the caller's RUNPATH, RTLD_DEEPBIND and dlmopen,
# which the runtime's own dlopen takes from the caller or refuses; and one
# CUPTI test whose failure under TSan is not explained yet.
tsan_unsupported_labels='pytorch|slurm'
# Left out under both (the comments below say why): the DriverRoutes tests
# of the caller's RUNPATH, RTLD_DEEPBIND and dlmopen, and one CUPTI test.
dlopen_route_tests='DlopenSearchesTheCallersRunpath|DlmopenSearchesTheCallersRunpath|DeepbindDlopenSearchesTheCallersRunpath|DeepbindThroughTheNextDlopenOfALoadedLibrary|FailedDlmopensSayWhyAndLeaveNoNamespaceBehind'
unexplained_cupti_test='^CuptiTrace\.TheCommandKeepsWhatIsPreloadedAndNamesTheFileAbsolutely$'
tsan_unsupported_tests="^DriverRoutes\.($dlopen_route_tests)\$|$unexplained_cupti_test"

# What cannot run under AddressSanitizer:
#  - programs not built with it that would load a sanitized library (the
#    runtime must come first in the initial library list; not done for
#    them yet): PyTorch (label pytorch), slurmd with the SPANK plugin
#    (label slurm);
#  - as under TSan, the caller's RUNPATH, RTLD_DEEPBIND and dlmopen, where
#    the runtime's own dlopen stands between (and a second namespace cannot
#    map a second runtime's shadow);
#  - `gpulimit preload`'s tests, whose check starts /bin/true with the
#    library preloaded and a clean environment, which an ASan-built library
#    does make fail (the check refuses it, as it should), and
#    operator_acceptance, which installs the build's .deb and runs the
#    host's own programs under its preload;
#  - the CUPTI test left out under TSan, which exits 1 here without a word
#    (not explained yet).
# The labels model and fuzz are left out too: SPIN's verifiers and the
# fuzzers are built the same whatever GPULIMIT_SANITIZE says (the fuzzers
# always with ASan and UBSan).
asan_unsupported_labels='pytorch|slurm|model|fuzz'
asan_unsupported_tests="^DriverRoutes\.($dlopen_route_tests|LibraryInANewNamespace|DriverInANewNamespace)\$|^PreloadCommand\.|^operator_acceptance\$|$unexplained_cupti_test"

summary=()
failed=0

configure() {  # BUILD_DIR SANITIZERS
  local generator=()
  if [[ ! -f "$1/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cmake -S . -B "$1" "${generator[@]}" -DGPULIMIT_SANITIZE="$2" >/dev/null
}

run_suite() {  # NAME
  local name=$1 build_dir sanitizers targets=() filter=()
  case $name in
    asan)
      build_dir=${GPULIMIT_ASAN_BUILD_DIR:-build-asan} sanitizers=address,undefined
      filter=(-LE "$asan_unsupported_labels" -E "$asan_unsupported_tests") ;;
    tsan)
      build_dir=${GPULIMIT_TSAN_BUILD_DIR:-build-tsan} sanitizers=thread
      filter=(-LE "$tsan_unsupported_labels" -E "$tsan_unsupported_tests") ;;
    tsan-concurrency)
      build_dir=${GPULIMIT_TSAN_BUILD_DIR:-build-tsan} sanitizers=thread
      targets=(--target "${concurrency_targets[@]}")
      filter=(-L concurrency) ;;
  esac
  echo "== $name: building $build_dir (GPULIMIT_SANITIZE=$sanitizers)"
  local start=$SECONDS
  configure "$build_dir" "$sanitizers"
  nice -n 10 cmake --build "$build_dir" --parallel "$(nproc)" "${targets[@]}"
  local built=$((SECONDS - start))

  local reports="$PWD/$build_dir/tsan-reports" status=0 options=${TSAN_OPTIONS:-}
  if [[ $sanitizers == thread ]]; then
    rm -rf "$reports"
    mkdir -p "$reports"
    options="log_path=$reports/report:$options"
  fi
  echo "== $name: testing"
  start=$SECONDS
  TSAN_OPTIONS=$options ctest --test-dir "$build_dir" --output-on-failure --parallel "$(nproc)" \
    "${filter[@]}" "${ctest_args[@]}" || status=$?
  local tested=$((SECONDS - start))
  if [[ $sanitizers == thread && -n "$(ls -A "$reports")" ]]; then
    # A file a process; only what names ThreadSanitizer is a report (the
    # runtime also says here why it refused a dlopen with RTLD_DEEPBIND).
    for report in "$reports"/*; do
      echo "---- $report"
      cat "$report"
      if grep -q "ThreadSanitizer" "$report"; then status=1; fi
    done
    ((status == 0)) || echo "== $name: ThreadSanitizer reported (above)"
  fi
  ((status == 0)) || failed=1
  summary+=("$name: build ${built} s, tests ${tested} s, $([[ $status == 0 ]] && echo passed || echo FAILED)")
}

for suite in "${suites[@]}"; do run_suite "$suite"; done
printf '== %s\n' "${summary[@]}"
exit "$failed"
