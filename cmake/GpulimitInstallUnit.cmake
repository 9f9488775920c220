# Runs at install time (cmake/GpulimitInstall.cmake), once the prefix of this
# install is known: installs gpulimitd.service with ExecStart naming the
# gpulimitd under that prefix. file(INSTALL) puts it under $DESTDIR, as
# cpack needs.

# The checked-in unit names /usr/local/bin/gpulimitd.
file(READ "${GPULIMIT_UNIT_SOURCE}" _gpulimit_unit)
string(REPLACE "\nExecStart=/usr/local/bin/gpulimitd "
               "\nExecStart=${CMAKE_INSTALL_PREFIX}/bin/gpulimitd " _gpulimit_unit
               "${_gpulimit_unit}")
string(FIND "${_gpulimit_unit}" "\nExecStart=${CMAKE_INSTALL_PREFIX}/bin/gpulimitd " _gpulimit_at)
if(_gpulimit_at EQUAL -1)
  message(FATAL_ERROR "${GPULIMIT_UNIT_SOURCE}: no line 'ExecStart=/usr/local/bin/gpulimitd ...' "
                      "to point at ${CMAKE_INSTALL_PREFIX}/bin/gpulimitd")
endif()
# Staged under a name of its own per destination: installs into several
# prefixes (a test's and cpack's) may run at once.
string(MD5 _gpulimit_destination "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(_gpulimit_staged "${GPULIMIT_UNIT_STAGING}/${_gpulimit_destination}/gpulimitd.service")
file(WRITE "${_gpulimit_staged}" "${_gpulimit_unit}")
file(INSTALL "${_gpulimit_staged}"
     DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system"
     FILE_PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
