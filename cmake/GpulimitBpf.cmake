# gpulimitd's kernel-side watcher (limiter-server/source/watcher/bpf): a
# CO-RE BPF object compiled with clang, a vmlinux.h dumped by bpftool from
# the build machine's BTF, and the skeleton header bpftool generates from the
# object, as libbpf-bootstrap builds its tools.
#
# GPULIMIT_BUILD_BPF (top-level CMakeLists.txt): AUTO builds it when clang,
# bpftool, libbpf and /sys/kernel/btf/vmlinux are all there, ON insists,
# OFF never builds it. Sets GPULIMIT_BPF_ENABLED and, when enabled, defines
# gpulimit_bpf_skeleton().

string(TOUPPER "${GPULIMIT_BUILD_BPF}" _gpulimit_bpf_request)
if(NOT _gpulimit_bpf_request MATCHES "^(AUTO|ON|OFF|TRUE|FALSE|YES|NO|1|0)$")
  message(FATAL_ERROR "GPULIMIT_BUILD_BPF: '${GPULIMIT_BUILD_BPF}' is none of AUTO, ON, OFF")
endif()
set(GPULIMIT_BPF_ENABLED OFF)

if(NOT _gpulimit_bpf_request MATCHES "^(OFF|FALSE|NO|0)$")
  find_program(GPULIMIT_BPF_CLANG NAMES clang clang-16 clang-15 clang-14)
  find_program(GPULIMIT_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin /usr/local/sbin)
  find_path(GPULIMIT_LIBBPF_INCLUDE_DIR bpf/libbpf.h)
  find_library(GPULIMIT_LIBBPF_LIBRARY NAMES bpf)
  # The BTF of the build machine's kernel; CO-RE relocates the object to
  # the kernel it is loaded on.
  set(GPULIMIT_BPF_VMLINUX_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH
      "BTF from which vmlinux.h is generated for the BPF watcher")

  set(_gpulimit_bpf_missing "")
  foreach(_what IN ITEMS GPULIMIT_BPF_CLANG GPULIMIT_BPFTOOL GPULIMIT_LIBBPF_INCLUDE_DIR
                         GPULIMIT_LIBBPF_LIBRARY)
    if(NOT ${_what})
      list(APPEND _gpulimit_bpf_missing ${_what})
    endif()
  endforeach()
  if(NOT EXISTS "${GPULIMIT_BPF_VMLINUX_BTF}")
    list(APPEND _gpulimit_bpf_missing "${GPULIMIT_BPF_VMLINUX_BTF}")
  endif()

  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    set(_gpulimit_bpf_arch x86)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(_gpulimit_bpf_arch arm64)
  else()
    list(APPEND _gpulimit_bpf_missing "support for ${CMAKE_SYSTEM_PROCESSOR}")
  endif()

  if(_gpulimit_bpf_missing)
    string(REPLACE ";" ", " _gpulimit_bpf_missing "${_gpulimit_bpf_missing}")
    if(_gpulimit_bpf_request STREQUAL "AUTO")
      message(STATUS "gpulimit: BPF watcher not built (missing: ${_gpulimit_bpf_missing}; "
                     "scripts/install-deps.sh installs clang, bpftool and libbpf-dev)")
    else()
      message(FATAL_ERROR "GPULIMIT_BUILD_BPF=ON, but missing: ${_gpulimit_bpf_missing}")
    endif()
  else()
    set(GPULIMIT_BPF_ENABLED ON)
    message(STATUS "gpulimit: BPF watcher built (${GPULIMIT_BPF_CLANG}, ${GPULIMIT_BPFTOOL})")
  endif()
endif()

if(GPULIMIT_BPF_ENABLED)
  add_library(gpulimit_libbpf INTERFACE)
  add_library(gpulimit::libbpf ALIAS gpulimit_libbpf)
  target_include_directories(gpulimit_libbpf SYSTEM INTERFACE "${GPULIMIT_LIBBPF_INCLUDE_DIR}")
  target_link_libraries(gpulimit_libbpf INTERFACE "${GPULIMIT_LIBBPF_LIBRARY}")

  set(GPULIMIT_BPF_GENERATED_DIR "${CMAKE_BINARY_DIR}/bpf-generated")
  file(MAKE_DIRECTORY "${GPULIMIT_BPF_GENERATED_DIR}")
  add_custom_command(
    OUTPUT "${GPULIMIT_BPF_GENERATED_DIR}/vmlinux.h"
    COMMAND "${GPULIMIT_BPFTOOL}" btf dump file "${GPULIMIT_BPF_VMLINUX_BTF}" format c
            > "${GPULIMIT_BPF_GENERATED_DIR}/vmlinux.h"
    COMMENT "bpftool: vmlinux.h from ${GPULIMIT_BPF_VMLINUX_BTF}"
    VERBATIM)
  # A custom command's output gets a rule only in the directory of a target
  # that uses it: this target is that user, and skeletons made in other
  # directories depend on it as a target (a file dependency across
  # directories has no rule to follow).
  add_custom_target(gpulimit_bpf_vmlinux DEPENDS "${GPULIMIT_BPF_GENERATED_DIR}/vmlinux.h")

  # gpulimit_bpf_skeleton(TARGET NAME SOURCE [DEPENDS headers...]): compiles
  # SOURCE (a .bpf.c) to NAME.bpf.o and makes NAME.skel.h of it, reachable
  # as a SYSTEM include of the INTERFACE library TARGET (bpftool's generated
  # code is not ours to hold to -Werror).
  function(gpulimit_bpf_skeleton target name source)
    cmake_parse_arguments(PARSE_ARGV 3 _arg "" "" "DEPENDS")
    get_filename_component(_source "${source}" ABSOLUTE)
    get_filename_component(_source_dir "${_source}" DIRECTORY)
    set(_object "${GPULIMIT_BPF_GENERATED_DIR}/${name}.bpf.o")
    set(_skeleton "${GPULIMIT_BPF_GENERATED_DIR}/${name}.skel.h")
    add_custom_command(
      OUTPUT "${_object}"
      COMMAND "${GPULIMIT_BPF_CLANG}" -g -O2 -target bpf -D__TARGET_ARCH_${_gpulimit_bpf_arch}
              -Wall -Werror -I "${GPULIMIT_BPF_GENERATED_DIR}" -I "${_source_dir}"
              -isystem "${GPULIMIT_LIBBPF_INCLUDE_DIR}" -c "${_source}" -o "${_object}"
      DEPENDS "${_source}" ${_arg_DEPENDS}
      COMMENT "clang -target bpf: ${name}.bpf.o"
      VERBATIM)
    add_custom_command(
      OUTPUT "${_skeleton}"
      COMMAND "${GPULIMIT_BPFTOOL}" gen skeleton "${_object}" name "${name}" > "${_skeleton}"
      DEPENDS "${_object}"
      COMMENT "bpftool gen skeleton: ${name}.skel.h"
      VERBATIM)
    add_custom_target(${target}_generate DEPENDS "${_skeleton}")
    add_dependencies(${target}_generate gpulimit_bpf_vmlinux)
    add_library(${target} INTERFACE)
    add_dependencies(${target} ${target}_generate)
    target_include_directories(${target} SYSTEM INTERFACE "${GPULIMIT_BPF_GENERATED_DIR}")
    target_link_libraries(${target} INTERFACE gpulimit::libbpf)
  endfunction()
endif()
