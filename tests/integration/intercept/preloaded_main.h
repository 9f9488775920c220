// A test process that must run with libgpulimit.so preloaded starts again,
// once, with its environment set: ctest's ENVIRONMENT cannot be relied on
// here (gtest_discover_tests keeps only the first variable of a list).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

namespace intercept_test {

// Sets `variables` (a temporary directory, for ledgers and the simulator's
// state, is `$GPULIMIT_TEST_DIR`) and re-executes this program; in the
// re-executed program, runs the tests and removes the directory.
inline int run_preloaded(int argc, char** argv,
                         const std::vector<std::pair<std::string, std::string>>& variables) {
  if (!getenv("GPULIMIT_TEST_DIR")) {
    char dir[] = "/tmp/gpulimit-intercept-test-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    setenv("GPULIMIT_TEST_DIR", dir, 1);
    setenv("FAKECUDA_STATE", (std::string(dir) + "/fakecuda.state").c_str(), 1);
    // In a sanitized build the preloaded library would precede the runtime.
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
    unsetenv("CUDA_VISIBLE_DEVICES");
    for (const auto& [name, value] : variables) {
      std::string expanded = value;
      if (const size_t at = expanded.find("$GPULIMIT_TEST_DIR"); at != std::string::npos)
        expanded.replace(at, 18, dir);
      setenv(name.c_str(), expanded.c_str(), 1);
    }
    execv("/proc/self/exe", argv);
    return 1;
  }
  testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const std::string cleanup = std::string("rm -rf ") + getenv("GPULIMIT_TEST_DIR");
  return std::system(cleanup.c_str()) == 0 ? result : 1;
}

}  // namespace intercept_test
