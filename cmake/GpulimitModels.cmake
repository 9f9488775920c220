# Model checks: the Promela models of gpulimit's cross-process protocols
# (shm/model/, libintercept/source/gate/model/), checked by SPIN as ctest
# tests with the label `model`. Each check generates the verifier (spin -a),
# compiles it with the C compiler and runs it exhaustively
# (cmake/run_model_check.cmake); a model that breaks a property fails its
# test, and each broken variant of a model must be rejected.
#
#   gpulimit_add_model_check(NAME name MODEL file.pml
#                            [SAFETY | LIVENESS claim]
#                            [DEFINES -DX=1 ...]
#                            [EXPECT_ERROR regex]
#                            [PAN_FLAGS -DBITSTATE ...] [RUN_FLAGS -w30 ...])
#
# SAFETY: assertions and invalid end states (pan.c with -DSAFETY, no never
# claim). LIVENESS claim: the model's `ltl claim`, acceptance cycles (-a)
# under weak fairness (-f). EXPECT_ERROR: SPIN must report an error whose
# line matches `regex` (a broken variant). PAN_FLAGS: more flags for
# compiling pan.c (-DBITSTATE or -DHC4: a search that is not exhaustive,
# and the check's line says so); RUN_FLAGS: more flags for running pan
# (-w30: the bitstate array's size).

option(GPULIMIT_MODEL_LONG
       "Also the model checks that take minutes to hours (the launch gate with faults, its liveness)"
       OFF)
find_program(GPULIMIT_SPIN spin)
set(GPULIMIT_MODEL_CC "${CMAKE_C_COMPILER}")

if(NOT GPULIMIT_SPIN)
  message(WARNING "gpulimit: no spin found: the protocol models (ctest -L model) are not checked, "
                  "and their test says so and is skipped (scripts/install-deps.sh installs spin)")
  add_test(NAME model.unavailable
           COMMAND ${CMAKE_COMMAND} -E echo
                   "no spin found when configuring: the protocol models were not checked")
  set_tests_properties(model.unavailable PROPERTIES LABELS model
                                                    SKIP_REGULAR_EXPRESSION "no spin found")
endif()

function(gpulimit_add_model_check)
  cmake_parse_arguments(check "SAFETY" "NAME;MODEL;LIVENESS;EXPECT_ERROR" "DEFINES;PAN_FLAGS;RUN_FLAGS"
                        ${ARGN})
  if(NOT GPULIMIT_SPIN)
    return()
  endif()
  if(check_LIVENESS)
    set(mode liveness)
  else()
    set(mode safety)
  endif()
  get_filename_component(model "${check_MODEL}" ABSOLUTE)
  string(REPLACE ";" " " defines "${check_DEFINES}")
  string(REPLACE ";" " " pan_flags "${check_PAN_FLAGS}")
  string(REPLACE ";" " " run_flags "${check_RUN_FLAGS}")
  add_test(NAME model.${check_NAME}
           COMMAND ${CMAKE_COMMAND}
                   -DSPIN=${GPULIMIT_SPIN}
                   -DCC=${GPULIMIT_MODEL_CC}
                   -DMODEL=${model}
                   -DMODE=${mode}
                   -DCLAIM=${check_LIVENESS}
                   "-DDEFINES=${defines}"
                   "-DEXPECT_ERROR=${check_EXPECT_ERROR}"
                   "-DPAN_FLAGS=${pan_flags}"
                   "-DRUN_FLAGS=${run_flags}"
                   -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/model.${check_NAME}
                   -P ${PROJECT_SOURCE_DIR}/cmake/run_model_check.cmake)
  # Alone: a verifier fills a core for tens of seconds, and the time-slicing
  # tests beside it would measure that, not gpulimit.
  set_tests_properties(model.${check_NAME} PROPERTIES LABELS model TIMEOUT 7200 RUN_SERIAL TRUE)
endfunction()
