# Runs in cpack once the package's files are staged (CPACK_PRE_BUILD_SCRIPTS
# of cmake/GpulimitPackaging.cmake), before the .deb is made.
#
# Configuration belongs in /etc: what the install rules put in <prefix>/etc
# (relative to the prefix /usr) moves there, and every file under /etc is a
# conffile, which dpkg keeps when an administrator has changed it.
set(_gpulimit_root "${CPACK_TEMPORARY_DIRECTORY}")
set(_gpulimit_prefix_etc "${_gpulimit_root}${CPACK_PACKAGING_INSTALL_PREFIX}/etc")
if(IS_DIRECTORY "${_gpulimit_prefix_etc}")
  file(MAKE_DIRECTORY "${_gpulimit_root}/etc")
  file(GLOB _gpulimit_entries LIST_DIRECTORIES true RELATIVE "${_gpulimit_prefix_etc}"
       "${_gpulimit_prefix_etc}/*")
  foreach(entry IN LISTS _gpulimit_entries)
    file(RENAME "${_gpulimit_prefix_etc}/${entry}" "${_gpulimit_root}/etc/${entry}")
  endforeach()
  file(REMOVE_RECURSE "${_gpulimit_prefix_etc}")
endif()

set(_gpulimit_conffiles "")
if(IS_DIRECTORY "${_gpulimit_root}/etc")
  file(GLOB_RECURSE _gpulimit_etc_files RELATIVE "${_gpulimit_root}" "${_gpulimit_root}/etc/*")
  list(SORT _gpulimit_etc_files)
  foreach(file IN LISTS _gpulimit_etc_files)
    string(APPEND _gpulimit_conffiles "/${file}\n")
  endforeach()
endif()
file(WRITE "${CPACK_GPULIMIT_DEBIAN_CONFFILES}" "${_gpulimit_conffiles}")
