# What `cmake --install` puts where, relative to the prefix:
#   bin/gpulimit, bin/gpulimitd   the command and the server it starts, side by
#                                 side: gpulimit looks for gpulimitd beside itself
#                                 (gpulimitd's rule is in limiter-server/)
#   lib/libgpulimit.so            the interposer, where gpulimit looks for it
#                                 (<bin>/../lib, tools/cli/common/interposer_library.cpp);
#                                 plain lib, not the multiarch directory: nothing
#                                 links against it, and /etc/ld.so.preload names
#                                 it by its path
#   lib/systemd/system/gpulimitd.service   with ExecStart naming bin/gpulimitd
#   share/man/man1/gpulimit.1, share/man/man8/gpulimitd.8   (docs/man)
#   etc/gpulimit/policy.toml      (limiter-server/; /etc in the .deb)
# Nothing of the tests, the simulated driver or the benchmarks is installed.

install(TARGETS gpulimit_cli RUNTIME DESTINATION bin)
install(TARGETS gpulimit_intercept LIBRARY DESTINATION lib)

# The unit's ExecStart names the gpulimitd of the install being made, whose
# prefix is known only when it runs: `cmake --install --prefix P` and cpack
# (which installs with the package's prefix, /usr) differ from the
# configured one.
install(CODE "
  set(GPULIMIT_UNIT_SOURCE \"${PROJECT_SOURCE_DIR}/limiter-server/gpulimitd.service\")
  set(GPULIMIT_UNIT_STAGING \"${PROJECT_BINARY_DIR}/install-staging\")
  include(\"${CMAKE_CURRENT_LIST_DIR}/GpulimitInstallUnit.cmake\")
")
