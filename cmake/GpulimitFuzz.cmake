# GPULIMIT_FUZZ: a build for the fuzzers of fuzz/. Everything it compiles
# carries libFuzzer's coverage and ASan with UBSan, so that a fuzzer sees
# into the parser it calls and any memory or undefined-behaviour error in it
# stops the run. Assertions stay on whatever the build type.

if(NOT GPULIMIT_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "GPULIMIT_FUZZ needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: "
                      "configure with -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
endif()
if(GPULIMIT_SANITIZE)
  message(FATAL_ERROR "GPULIMIT_FUZZ brings its own sanitizers (address,undefined): "
                      "leave GPULIMIT_SANITIZE empty")
endif()

set(GPULIMIT_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                        -fno-omit-frame-pointer -O1 -g -UNDEBUG)
add_compile_options(${GPULIMIT_FUZZ_FLAGS})
add_link_options(-fsanitize=address,undefined)

include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
check_cxx_source_compiles([[
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, std::size_t) { return 0; }
]] GPULIMIT_HAVE_LIBFUZZER)
unset(CMAKE_REQUIRED_FLAGS)
if(NOT GPULIMIT_HAVE_LIBFUZZER)
  message(FATAL_ERROR "GPULIMIT_FUZZ: ${CMAKE_CXX_COMPILER} cannot link a libFuzzer program "
                      "(-fsanitize=fuzzer): its compiler-rt lacks libclang_rt.fuzzer")
endif()
message(STATUS "gpulimit: fuzz build (libFuzzer, address, undefined)")
