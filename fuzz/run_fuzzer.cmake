# Runs one fuzzer as a test (fuzz/CMakeLists.txt defines them):
#
#   cmake -DFUZZER=<binary> -DNAME=<name> -DSEEDS=<dir> -DREGRESSIONS=<dir>
#         -DWORK=<dir> -DMODE=fuzz -DSECONDS=<n> -P run_fuzzer.cmake
#     fuzzes for SECONDS, starting from SEEDS and what earlier runs kept in
#     WORK/corpus (new inputs go there, never into the source tree);
#   cmake ... -DMODE=replay -P run_fuzzer.cmake
#     runs every file of SEEDS and REGRESSIONS once.
#
# Fails when the fuzzer finds a crash, a leak, a sanitizer report or an
# input that runs too long; libFuzzer then writes the input to WORK/ and
# the message below says where it goes.

foreach(required FUZZER NAME SEEDS REGRESSIONS WORK MODE)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${required}=... is required")
  endif()
endforeach()
if(NOT EXISTS "${FUZZER}")
  message(FATAL_ERROR "${FUZZER} is missing: build the fuzzers first")
endif()

file(MAKE_DIRECTORY "${WORK}/corpus")
# Crashes stop at once, with a report; a hang or a huge allocation is a
# finding too.
set(ENV{ASAN_OPTIONS} "abort_on_error=0:detect_leaks=1:$ENV{ASAN_OPTIONS}")
set(ENV{UBSAN_OPTIONS} "print_stacktrace=1:halt_on_error=1:$ENV{UBSAN_OPTIONS}")
set(common -rss_limit_mb=2048 -timeout=30 "-artifact_prefix=${WORK}/")

if(MODE STREQUAL "fuzz")
  if(NOT DEFINED SECONDS)
    message(FATAL_ERROR "run_fuzzer.cmake: -DSECONDS=... is required with MODE=fuzz")
  endif()
  execute_process(COMMAND "${FUZZER}" ${common} -max_total_time=${SECONDS} -print_final_stats=1
                          "${WORK}/corpus" "${SEEDS}"
                  RESULT_VARIABLE status)
elseif(MODE STREQUAL "replay")
  file(GLOB inputs LIST_DIRECTORIES false "${SEEDS}/*" "${REGRESSIONS}/*")
  list(FILTER inputs EXCLUDE REGEX "/README[^/]*$")
  list(LENGTH inputs count)
  if(count EQUAL 0)
    message(FATAL_ERROR "${NAME}: no seeds in ${SEEDS}")
  endif()
  message(STATUS "${NAME}: replaying ${count} inputs")
  execute_process(COMMAND "${FUZZER}" ${common} ${inputs} RESULT_VARIABLE status)
else()
  message(FATAL_ERROR "run_fuzzer.cmake: MODE is fuzz or replay, not '${MODE}'")
endif()

if(NOT status EQUAL 0)
  message(FATAL_ERROR
    "${NAME}_fuzzer failed (${status}). The input that broke it is in ${WORK}/ (crash-*, leak-*, "
    "timeout-*, oom-*): fix the parser, add a unit test, and keep the input as "
    "fuzz/regressions/${NAME}/<what it is>.")
endif()
