# One model check (GpulimitModels.cmake): spin -a, compile pan.c, run it,
# and judge what it says. Run as cmake -P with SPIN, CC, MODEL, MODE
# (safety or liveness), CLAIM (liveness: the ltl name), DEFINES (-D...,
# space-separated), EXPECT_ERROR (empty: the model must pass) and WORK_DIR;
# optionally PAN_FLAGS and RUN_FLAGS (space-separated: more flags for
# compiling and for running pan, e.g. -DBITSTATE and -w30).

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
separate_arguments(defines UNIX_COMMAND "${DEFINES}")
separate_arguments(extra_pan_flags UNIX_COMMAND "${PAN_FLAGS}")
separate_arguments(extra_run_flags UNIX_COMMAND "${RUN_FLAGS}")

execute_process(COMMAND "${SPIN}" -a ${defines} "${MODEL}"
                WORKING_DIRECTORY "${WORK_DIR}"
                RESULT_VARIABLE generated OUTPUT_VARIABLE spin_out ERROR_VARIABLE spin_out)
if(NOT generated EQUAL 0 OR NOT EXISTS "${WORK_DIR}/pan.c")
  message(FATAL_ERROR "spin -a ${DEFINES} ${MODEL} failed:\n${spin_out}")
endif()

# COLLAPSE: the state vectors compressed, exhaustive still. NFAIR: room in
# the fairness bookkeeping for every process of the models.
set(pan_flags -O2 -DCOLLAPSE -DVECTORSZ=2048)
set(run_flags -m2000000)
if(MODE STREQUAL "safety")
  list(APPEND pan_flags -DSAFETY -DNOCLAIM)
else()
  list(APPEND pan_flags -DNFAIR=4)
  list(APPEND run_flags -a -f -N ${CLAIM})
endif()
list(FIND extra_pan_flags -DBITSTATE bitstate)
if(NOT bitstate EQUAL -1)
  list(REMOVE_ITEM pan_flags -DCOLLAPSE)                # pan.c allows only one of them
endif()
list(APPEND pan_flags ${extra_pan_flags})
list(APPEND run_flags ${extra_run_flags})
execute_process(COMMAND "${CC}" ${pan_flags} -o pan pan.c
                WORKING_DIRECTORY "${WORK_DIR}"
                RESULT_VARIABLE compiled OUTPUT_VARIABLE cc_out ERROR_VARIABLE cc_out)
if(NOT compiled EQUAL 0)
  message(FATAL_ERROR "compiling the verifier of ${MODEL} failed:\n${cc_out}")
endif()

string(TIMESTAMP started "%s")
execute_process(COMMAND ./pan ${run_flags}
                WORKING_DIRECTORY "${WORK_DIR}"
                RESULT_VARIABLE ran OUTPUT_VARIABLE pan_out ERROR_VARIABLE pan_out)
string(TIMESTAMP finished "%s")
math(EXPR seconds "${finished} - ${started}")

string(REGEX MATCH "errors: ([0-9]+)" errors_line "${pan_out}")
set(errors "${CMAKE_MATCH_1}")
string(REGEX MATCH "([0-9.e+]+) states, stored" states_line "${pan_out}")
set(states "${CMAKE_MATCH_1}")
string(REGEX MATCH "pan:1: [^\n]*" first_error "${pan_out}")
# Bitstate and hash-compact searches may miss states: said on the line,
# with pan's hash factor for bitstate.
set(coverage "")
if(pan_out MATCHES "Bit statespace search")
  string(REGEX MATCH "hash factor: ([0-9.e+]+)" factor_line "${pan_out}")
  set(coverage " (bitstate, not exhaustive: hash factor ${CMAKE_MATCH_1})")
elseif(pan_out MATCHES "Hash-Compact")
  set(coverage " (hash-compact, not exhaustive)")
endif()
set(extra "")
foreach(flags IN ITEMS "${PAN_FLAGS}" "${RUN_FLAGS}")
  if(NOT flags STREQUAL "")
    string(APPEND extra " ${flags}")
  endif()
endforeach()
get_filename_component(model_name "${MODEL}" NAME)
message("${model_name} ${MODE}${CLAIM} ${DEFINES}${extra}: ${states} states, ${seconds} s, "
        "${errors} errors${coverage} ${first_error}")

if(errors STREQUAL "")
  message(FATAL_ERROR "the verifier gave no verdict:\n${pan_out}")
endif()
if(pan_out MATCHES "max search depth too small")
  message(FATAL_ERROR "the search was cut short (max search depth too small):\n${pan_out}")
endif()
if(EXPECT_ERROR STREQUAL "")
  if(NOT errors EQUAL 0)
    execute_process(COMMAND "${SPIN}" -t -p -g ${defines} "${MODEL}"
                    WORKING_DIRECTORY "${WORK_DIR}" OUTPUT_VARIABLE trail ERROR_VARIABLE trail)
    string(LENGTH "${trail}" length)
    if(length GREATER 20000)
      math(EXPR from "${length} - 20000")
      string(SUBSTRING "${trail}" ${from} 20000 trail)
    endif()
    message(FATAL_ERROR "SPIN found a violation: ${first_error}\n${pan_out}\n"
                        "the counterexample's end (spin -t -p -g):\n${trail}")
  endif()
else()
  if(errors EQUAL 0)
    message(FATAL_ERROR "SPIN accepted a model it must reject (${DEFINES}):\n${pan_out}")
  endif()
  if(NOT first_error MATCHES "${EXPECT_ERROR}")
    message(FATAL_ERROR "SPIN rejected the model, but not for '${EXPECT_ERROR}':\n${pan_out}")
  endif()
endif()
