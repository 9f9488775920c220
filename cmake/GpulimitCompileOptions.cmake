# Compile options for gpulimit's own targets. Third-party code is never built
# with these: link `gpulimit::warnings` only from targets we own.

add_library(gpulimit_warnings INTERFACE)
add_library(gpulimit::warnings ALIAS gpulimit_warnings)
target_compile_options(gpulimit_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
  -Wformat=2 -Wimplicit-fallthrough -Werror)

# GPULIMIT_SANITIZE applies to everything we build, so that a sanitized test
# binary and the sanitized libraries it loads agree on the runtime.
# GPULIMIT_THREAD_SANITIZER, a CMake variable and a macro of every source,
# tells the few places that differ under ThreadSanitizer;
# GPULIMIT_ADDRESS_SANITIZER, a CMake variable, those under AddressSanitizer
# (and a macro of the one source that needs it, libintercept/CMakeLists.txt).
set(GPULIMIT_THREAD_SANITIZER FALSE)
set(GPULIMIT_ADDRESS_SANITIZER FALSE)
set(GPULIMIT_SANITIZER_RUNTIMES "")
if(GPULIMIT_SANITIZE)
  set(_gpulimit_known_sanitizers address undefined thread leak)
  string(REPLACE "," ";" _gpulimit_sanitizers "${GPULIMIT_SANITIZE}")
  foreach(_s IN LISTS _gpulimit_sanitizers)
    if(NOT _s IN_LIST _gpulimit_known_sanitizers)
      message(FATAL_ERROR "GPULIMIT_SANITIZE: unknown sanitizer '${_s}' "
                          "(known: ${_gpulimit_known_sanitizers})")
    endif()
  endforeach()
  if("thread" IN_LIST _gpulimit_sanitizers AND "address" IN_LIST _gpulimit_sanitizers)
    message(FATAL_ERROR "GPULIMIT_SANITIZE: 'thread' cannot be combined with 'address'")
  endif()
  if("thread" IN_LIST _gpulimit_sanitizers)
    set(GPULIMIT_THREAD_SANITIZER TRUE)
    add_compile_definitions(GPULIMIT_THREAD_SANITIZER)
  endif()
  if("address" IN_LIST _gpulimit_sanitizers)
    set(GPULIMIT_ADDRESS_SANITIZER TRUE)
  endif()
  # The sanitizers' runtimes, for the tests that start a program not built
  # with them (nvcc's, Python) which then loads a sanitized library: a
  # runtime loaded by dlopen fails (ThreadSanitizer's static TLS; ASan wants
  # to come first), so such a program preloads them: LD_PRELOAD's value,
  # paths separated by colons, in GPULIMIT_SANITIZER_RUNTIMES (a CMake
  # variable, empty without sanitizers, and the macro of the tests that use it).
  foreach(_s IN LISTS _gpulimit_sanitizers)
    set(_runtime "")
    if(_s STREQUAL "address")
      set(_runtime libasan.so)
    elseif(_s STREQUAL "thread")
      set(_runtime libtsan.so)
    elseif(_s STREQUAL "undefined")
      set(_runtime libubsan.so)
    endif()
    if(_runtime)
      execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${_runtime}
                      OUTPUT_VARIABLE _path OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(IS_ABSOLUTE "${_path}" AND EXISTS "${_path}")
        file(REAL_PATH "${_path}" _path)
        list(APPEND GPULIMIT_SANITIZER_RUNTIMES "${_path}")
      endif()
    endif()
  endforeach()
  list(JOIN GPULIMIT_SANITIZER_RUNTIMES ":" GPULIMIT_SANITIZER_RUNTIMES)
  add_compile_options(-fsanitize=${GPULIMIT_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  # GCC's maybe-uninitialized analysis sees the sanitizers' instrumentation
  # and warns inside libstdc++ (<regex>, <functional>) where plain builds are
  # clean; the sanitizers themselves check what it would guess at.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(gpulimit_warnings INTERFACE -Wno-maybe-uninitialized)
  endif()
  add_link_options(-fsanitize=${GPULIMIT_SANITIZE})
  message(STATUS "gpulimit: sanitizers ${GPULIMIT_SANITIZE}")
endif()
