# The .deb: `cmake --build build --target package` (or cpack in the build
# directory) makes build/gpulimit_<version>_<arch>.deb from the install rules
# (cmake/GpulimitInstall.cmake), with prefix /usr.
#
# Installed with a DESTDIR (CPACK_SET_DESTDIR), so that what the install
# writes for its prefix (gpulimitd.service's ExecStart) names /usr, not the
# staging directory.

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "gpulimit")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}: GPU memory caps and time-slicing")
set(CPACK_PACKAGE_CONTACT "gpulimit maintainers <gpulimit@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX "${CPACK_PACKAGING_INSTALL_PREFIX}")  # the prefix with a DESTDIR
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_PACKAGE_NAME "gpulimit")
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")  # gpulimit_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION "utils")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
string(CONCAT CPACK_DEBIAN_PACKAGE_DESCRIPTION
       "Share one NVIDIA GPU between tenants without MPS or MIG\n"
       "libgpulimit.so, loaded with LD_PRELOAD, hooks the CUDA driver API and gives\n"
       "each tenant (a job and every process it starts) a hard GPU-memory cap and a\n"
       "share of GPU time, coordinated through shared memory with gpulimitd, the\n"
       "token server. `gpulimit --mem 10G -- python train.py` runs a job under a\n"
       "10 GiB cap.")
# The libraries gpulimit and gpulimitd link (libspdlog, libfmt, libc...),
# found by dpkg-shlibdeps (Debian: dpkg-dev).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# NVIDIA's driver (libcuda.so.1, libnvidia-ml.so.1) is opened at run time and
# comes from NVIDIA's installer as often as from a package: not a dependency.

# Maintainer scripts: postinst tells systemd of the unit and starts nothing
# (the system server and /etc/ld.so.preload are opt-in); prerm, when the
# package goes, removes libgpulimit.so from /etc/ld.so.preload before the
# library is deleted, so that no program starts with a missing preload.
# conffiles is written once the files are staged (GpulimitPackageStaged.cmake).
set(_gpulimit_debian_dir "${PROJECT_BINARY_DIR}/debian-control")
set(GPULIMIT_PACKAGE_BINDIR "${CPACK_PACKAGING_INSTALL_PREFIX}/bin")
configure_file("${CMAKE_CURRENT_LIST_DIR}/debian/postinst.in" "${_gpulimit_debian_dir}/postinst"
               @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                                      GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
configure_file("${CMAKE_CURRENT_LIST_DIR}/debian/prerm.in" "${_gpulimit_debian_dir}/prerm"
               @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                                      GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${_gpulimit_debian_dir}/postinst;${_gpulimit_debian_dir}/prerm;${_gpulimit_debian_dir}/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# Read by the staging script, which cpack runs with the CPACK_ variables only.
set(CPACK_GPULIMIT_DEBIAN_CONFFILES "${_gpulimit_debian_dir}/conffiles")
if(NOT EXISTS "${CPACK_GPULIMIT_DEBIAN_CONFFILES}")
  file(WRITE "${CPACK_GPULIMIT_DEBIAN_CONFFILES}" "")
endif()
set(CPACK_PRE_BUILD_SCRIPTS "${CMAKE_CURRENT_LIST_DIR}/GpulimitPackageStaged.cmake")

include(CPack)
