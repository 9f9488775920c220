# Installs this build tree into a prefix of the test's own and makes the .deb
# from it, as a user and a packager would, then checks what came out:
#  - the installed files (gpulimit's own at least), and nothing of the tests;
#  - gpulimit --help and gpulimitd --help run from the prefix, and gpulimit
#    there preloads the libgpulimit.so of the prefix;
#  - the man pages mention every option the programs' --help lists;
#  - the .deb's files, control fields and conffiles, and its gpulimit run
#    from the unpacked tree.
# Nothing is built: the targets are the build tree's, made before ctest runs.
#
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DSOURCE_DIR=... -DVERSION=...
#         -DCPACK=... -P install_test.cmake

cmake_minimum_required(VERSION 3.25)  # policies of today (IN_LIST) in script mode

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(failures "")

macro(failed message)
  string(APPEND failures "  ${message}\n")
endmacro()

# Runs a program with GPULIMIT_LIBRARY and GPULIMIT_SERVER unset, so that
# gpulimit finds what it finds by itself. A sanitized build's library,
# preloaded into /usr/bin/env, comes before the AddressSanitizer runtime it
# needs: ASAN_OPTIONS lets it (no effect on a build without it).
function(run out_var status_var)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E env --unset=GPULIMIT_LIBRARY
                          --unset=GPULIMIT_SERVER --unset=LD_PRELOAD
                          ASAN_OPTIONS=verify_asan_link_order=0 ${ARGN}
                  OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE status
                  TIMEOUT 60)
  set(${out_var} "${output}${errors}" PARENT_SCOPE)
  set(${status_var} "${status}" PARENT_SCOPE)
endfunction()

# Every --option a --help page names.
function(options_of help out_var)
  string(REGEX MATCHALL "--[a-z][a-z-]*[a-z]" found "${help}")
  list(REMOVE_DUPLICATES found)
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()

# ---------------------------------------------------------------------------
# cmake --install

execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
                OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${status}):\n${output}${errors}")
endif()

set(expected
    bin/gpulimit
    bin/gpulimitd
    lib/libgpulimit.so
    lib/systemd/system/gpulimitd.service
    share/man/man1/gpulimit.1
    share/man/man8/gpulimitd.8)
if(EXISTS "${SOURCE_DIR}/limiter-server/policy.toml")
  list(APPEND expected etc/gpulimit/policy.toml)
endif()
file(GLOB_RECURSE installed LIST_DIRECTORIES false RELATIVE "${prefix}" "${prefix}/*")
foreach(file IN LISTS expected)
  if(NOT file IN_LIST installed)
    failed("${file} was not installed (installed: ${installed})")
  endif()
endforeach()
set(others "${installed}")
list(REMOVE_ITEM others ${expected})
message("installed besides gpulimit's own: ${others}")

# Nothing of the tests, the simulated driver or the benchmarks: no install
# rule in their directories.
file(GLOB_RECURSE scripts "${BUILD_DIR}/tests/*cmake_install.cmake"
     "${BUILD_DIR}/benchmarks/*cmake_install.cmake")
foreach(script IN LISTS scripts)
  file(READ "${script}" text)
  string(FIND "${text}" "file(INSTALL" at)
  if(NOT at EQUAL -1)
    failed("${script} installs something")
  endif()
endforeach()

file(READ "${prefix}/lib/systemd/system/gpulimitd.service" unit)
string(FIND "${unit}" "\nExecStart=${prefix}/bin/gpulimitd --system" at)
if(at EQUAL -1)
  failed("gpulimitd.service does not start ${prefix}/bin/gpulimitd:\n${unit}")
endif()

run(gpulimit_help status "${prefix}/bin/gpulimit" --help)
if(NOT (status EQUAL 0))
  failed("installed gpulimit --help exited with ${status}: ${gpulimit_help}")
endif()
if(NOT (gpulimit_help MATCHES "SYNOPSIS"))
  failed("installed gpulimit --help printed: ${gpulimit_help}")
endif()
run(gpulimitd_help status "${prefix}/bin/gpulimitd" --help)
if(NOT (status EQUAL 0))
  failed("installed gpulimitd --help exited with ${status}: ${gpulimitd_help}")
endif()
if(NOT (gpulimitd_help MATCHES "--system"))
  failed("installed gpulimitd --help printed: ${gpulimitd_help}")
endif()

# A job started by the installed gpulimit preloads the installed library.
run(job status "${prefix}/bin/gpulimit" --no-server -- /usr/bin/env)
if(NOT (status EQUAL 0))
  failed("installed gpulimit could not run a job (${status}): ${job}")
endif()
string(FIND "\n${job}" "\nLD_PRELOAD=${prefix}/lib/libgpulimit.so" at)
if(at EQUAL -1)
  failed("the job of the installed gpulimit does not preload ${prefix}/lib/libgpulimit.so:\n${job}")
endif()

# The man pages, as text: roff writes a hyphen as \-.
foreach(page gpulimit:share/man/man1/gpulimit.1 gpulimitd:share/man/man8/gpulimitd.8)
  string(REPLACE ":" ";" page "${page}")
  list(GET page 0 program)
  list(GET page 1 path)
  file(READ "${prefix}/${path}" roff)
  string(REPLACE "\\-" "-" roff "${roff}")
  if(NOT (roff MATCHES "^[.]" OR roff MATCHES "\n[.]TH"))
    failed("${path} is not a man page")
  endif()
  options_of("${${program}_help}" options)
  list(LENGTH options count)
  if(NOT (count GREATER 3))
    failed("${program} --help names only these options: '${options}'")
  endif()
  foreach(option IN LISTS options)
    string(FIND "${roff}" "${option}" at)
    if(at EQUAL -1)
      failed("${path} does not mention ${option}")
    endif()
  endforeach()
endforeach()

# ---------------------------------------------------------------------------
# The .deb, made by cpack from the build tree's install rules

find_program(DPKG_DEB dpkg-deb)
if(NOT DPKG_DEB)
  if(NOT failures STREQUAL "")
    message(FATAL_ERROR "install checks failed:\n${failures}")
  endif()
  message("SKIPPED: dpkg-deb not found (Debian: dpkg); the .deb was not checked")
  return()
endif()

execute_process(COMMAND "${CPACK}" -G DEB --config "${BUILD_DIR}/CPackConfig.cmake"
                        -B "${WORK_DIR}/package"
                OUTPUT_VARIABLE output ERROR_VARIABLE errors RESULT_VARIABLE status
                TIMEOUT 240)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cpack failed (${status}):\n${output}${errors}\n${failures}")
endif()
file(GLOB debs "${WORK_DIR}/package/gpulimit_${VERSION}_*.deb")
list(LENGTH debs count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "cpack made '${debs}', not one gpulimit_${VERSION}_ARCH.deb:\n${output}")
endif()

execute_process(COMMAND "${DPKG_DEB}" --contents "${debs}" OUTPUT_VARIABLE listing
                RESULT_VARIABLE status)
if(NOT (status EQUAL 0))
  failed("dpkg-deb --contents failed")
endif()
# Files only (directories end with '/'), as paths.
string(REGEX MATCHALL "\\./[^ \n]*[^/\n]\n" packaged "${listing}")
string(REGEX REPLACE "\n" "" packaged "${packaged}")
set(expected_packaged
    ./usr/bin/gpulimit
    ./usr/bin/gpulimitd
    ./usr/lib/libgpulimit.so
    ./usr/lib/systemd/system/gpulimitd.service
    ./usr/share/man/man1/gpulimit.1
    ./usr/share/man/man8/gpulimitd.8)
if(EXISTS "${SOURCE_DIR}/limiter-server/policy.toml")
  list(APPEND expected_packaged ./etc/gpulimit/policy.toml)
endif()
foreach(file IN LISTS expected_packaged)
  if(NOT file IN_LIST packaged)
    failed("the .deb lacks ${file} (it holds ${packaged})")
  endif()
endforeach()
# Exactly what cmake --install installed, with /etc at the root.
list(LENGTH packaged packaged_count)
list(LENGTH installed installed_count)
if(NOT packaged_count EQUAL installed_count)
  failed("the .deb holds ${packaged_count} files, the install ${installed_count}: ${packaged}")
endif()

execute_process(COMMAND "${DPKG_DEB}" --field "${debs}" Package Version Depends
                OUTPUT_VARIABLE fields RESULT_VARIABLE status)
if(NOT (fields MATCHES "Package: gpulimit\n"))
  failed("the .deb's Package field: ${fields}")
endif()
if(NOT (fields MATCHES "Version: ${VERSION}\n"))
  failed("the .deb's Version field: ${fields}")
endif()
if(NOT (fields MATCHES "Depends: [^\n]*libc6"))
  failed("the .deb's Depends lack libc6: ${fields}")
endif()

execute_process(COMMAND "${DPKG_DEB}" --control "${debs}" "${WORK_DIR}/control"
                RESULT_VARIABLE status)
if(NOT (status EQUAL 0))
  failed("dpkg-deb --control failed")
endif()
if(EXISTS "${SOURCE_DIR}/limiter-server/policy.toml")
  file(READ "${WORK_DIR}/control/conffiles" conffiles)
  if(NOT (conffiles STREQUAL "/etc/gpulimit/policy.toml\n"))
    failed("the .deb's conffiles: '${conffiles}'")
  endif()
endif()
foreach(script postinst prerm)
  if(NOT EXISTS "${WORK_DIR}/control/${script}")
    failed("the .deb has no ${script}")
  endif()
endforeach()

# Unpacked, the packaged gpulimit finds the packaged library beside it, and
# the unit starts the packaged gpulimitd.
set(root "${WORK_DIR}/root")
execute_process(COMMAND "${DPKG_DEB}" --extract "${debs}" "${root}" RESULT_VARIABLE status)
if(NOT (status EQUAL 0))
  failed("dpkg-deb --extract failed")
endif()
file(READ "${root}/usr/lib/systemd/system/gpulimitd.service" unit)
if(NOT (unit MATCHES "\nExecStart=/usr/bin/gpulimitd --system"))
  failed("the packaged gpulimitd.service does not start /usr/bin/gpulimitd:\n${unit}")
endif()
run(job status "${root}/usr/bin/gpulimit" --no-server -- /usr/bin/env)
if(NOT (status EQUAL 0))
  failed("the packaged gpulimit could not run a job (${status}): ${job}")
endif()
string(FIND "\n${job}" "\nLD_PRELOAD=${root}/usr/lib/libgpulimit.so" at)
if(at EQUAL -1)
  failed("the job of the packaged gpulimit does not preload its libgpulimit.so:\n${job}")
endif()

if(NOT failures STREQUAL "")
  message(FATAL_ERROR "install and package checks failed:\n${failures}")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
message("installed and packaged: ${expected}")
