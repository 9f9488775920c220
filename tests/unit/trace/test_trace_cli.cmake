# Runs gpulimit-trace on the traces in DATA_DIR and checks what it prints and
# its exit status. ctest runs it as
#   cmake -DGPULIMIT_TRACE=<gpulimit-trace> -DDATA_DIR=<dir> -P test_trace_cli.cmake
#
# Each check takes one string (several lines of output are one quoted string
# spanning lines): expected output contains '[', which CMake would take for a
# bracket if the strings travelled as a list.

foreach(required GPULIMIT_TRACE DATA_DIR)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "test_trace_cli.cmake: -D${required}=... is required")
  endif()
endforeach()

# run(<expected exit status> <argument>...): runs gpulimit-trace and keeps
# its stdout and stderr for the expect_* checks that follow.
function(run expected_status)
  execute_process(COMMAND "${GPULIMIT_TRACE}" ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  list(JOIN ARGN " " shown_args)
  set(context "gpulimit-trace ${shown_args}\n--- stdout:\n${out}--- stderr:\n${err}")
  if(NOT status STREQUAL expected_status)
    message(FATAL_ERROR "exit status ${status}, expected ${expected_status}: ${context}")
  endif()
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
  set(context "${context}" PARENT_SCOPE)
endfunction()

function(expect_stdout text)
  string(FIND "${out}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "stdout lacks '${text}': ${context}")
  endif()
endfunction()

function(expect_stdout_lacks text)
  string(FIND "${out}" "${text}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "stdout has '${text}': ${context}")
  endif()
endfunction()

# A user sees at most one line on stderr: `line` exactly, or nothing when "".
function(expect_stderr line)
  if(line STREQUAL "")
    set(expected "")
  else()
    set(expected "${line}\n")
  endif()
  if(NOT err STREQUAL expected)
    message(FATAL_ERROR "stderr should be '${expected}': ${context}")
  endif()
endfunction()

set(sliced "${DATA_DIR}/time_sliced.trace")
set(overlapping "${DATA_DIR}/overlapping.trace")

# Numbers by hand: device 0's window is [1 ms, 5 ms); pid 101 ran 1.5 ms,
# 102 0.5 ms, 103 1.5 ms, and the device idled 0.5 ms.
run(0 "${sliced}")
expect_stdout("device 0: window [1000000, 5000000) ns, 0.004000 s
  tenant / pid   kernels        GPU s    share
  pid 101              2     0.001500   37.50%
  pid 102              1     0.000500   12.50%
  pid 103              2     0.001500   37.50%
  device busy          5     0.003500   87.50%
  overlaps between processes: 0

device 1: window [1000000, 1500000) ns, 0.000500 s
  tenant / pid   kernels        GPU s    share
  pid 104              1     0.000500  100.00%
  device busy          1     0.000500  100.00%
  overlaps between processes: 0
")
expect_stderr("")

run(0 "${sliced}" --device 0 --tenant alice=101,102)
expect_stdout("
  alice                3     0.002000   50.00%
    pid 101            2     0.001500   37.50%
    pid 102            1     0.000500   12.50%
  pid 103              2     0.001500   37.50%
")
expect_stdout_lacks("device 1")
expect_stderr("")

run(0 "${sliced}" --device 0 --from 2500000 --to 4500000)
expect_stdout("device 0: window [2500000, 4500000) ns, 0.002000 s\n")
expect_stdout("  pid 101              1     0.000500   25.00%\n")
expect_stdout("  device busy          3     0.001500   75.00%\n")
expect_stderr("")

run(0 "${sliced}" --device 0 --json)
expect_stdout("\"busy_fraction\": 0.875,")
expect_stdout("{\"pid\": 103, \"kernels\": 2, \"busy_ns\": 1500000, \"share\": 0.375}")
expect_stdout("\"overlaps\": {\"count\": 0, \"examples\": []}")
expect_stdout_lacks("device 0:")
expect_stderr("")

run(0 "${sliced}" --check-no-overlap)
expect_stderr("")

# Overlaps are reported either way; only --check-no-overlap makes them a failure.
run(0 "${overlapping}")
expect_stdout("
  overlaps between processes: 2
    pid 201 stream 1 [0, 1000) first (line 2) and pid 202 stream 1 [500, 1500) intruder (line 3): 500 ns
    pid 202 stream 1 [500, 1500) intruder (line 3) and pid 201 stream 2 [600, 800) second (line 4): 200 ns
")
expect_stderr("")

run(1 "${overlapping}" --check-no-overlap)
expect_stdout("  overlaps between processes: 2\n")
expect_stderr("gpulimit-trace: kernels of different processes overlap on device 0 (2 pairs)")

run(1 "${overlapping}" --check-no-overlap --json)
expect_stdout("\"overlaps\": {\"count\": 2, \"examples\": [")
expect_stderr("gpulimit-trace: kernels of different processes overlap on device 0 (2 pairs)")

# Bad input: one line on stderr, exit status 2.
run(2 "${DATA_DIR}/malformed.trace")
expect_stderr("gpulimit-trace: ${DATA_DIR}/malformed.trace:5: end_ns 2500 is before start_ns 3000")

run(2 "${DATA_DIR}/missing.trace")
expect_stderr("gpulimit-trace: ${DATA_DIR}/missing.trace: cannot open: No such file or directory")

run(2 "${sliced}" --tenant alice)
expect_stderr("gpulimit-trace: --tenant 'alice': expected NAME=PID,PID...")

run(2 "${sliced}" --tenant a=101 --tenant b=102,101)
expect_stderr("gpulimit-trace: --tenant: pid 101 is in both 'a' and 'b'")

run(2 "${sliced}" --from 5 --to 5)
expect_stderr("gpulimit-trace: the window [--from, --to) is empty: --to 5 is not after --from 5")

run(2 "${sliced}" --device -1)
expect_stderr("gpulimit-trace: --device '-1' is not a decimal number in [0, 2147483647]")

run(2)
expect_stderr("gpulimit-trace: FILE is required")

run(0 --help)
expect_stdout("Usage: gpulimit-trace [OPTIONS] FILE")
expect_stdout("--check-no-overlap")
expect_stdout("Exit status: 0 success")
expect_stderr("")
