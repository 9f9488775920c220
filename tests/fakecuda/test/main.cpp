// Every test process simulates its own machine: a fresh state file in a
// fresh directory, so tests run in parallel without seeing each other.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

int main(int argc, char** argv) {
  char dir[] = "/tmp/fakecuda-test-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("FAKECUDA_STATE", (std::string(dir) + "/state").c_str(), 1);
  setenv("FAKECUDA_DEVICES", "2", 0);
  setenv("FAKECUDA_MEM", "4G", 0);
  setenv("FAKECUDA_CTX_MEM", "64M", 0);
  setenv("FAKECUDA_TEST_DIR", dir, 1);
  unsetenv("CUDA_VISIBLE_DEVICES");
  testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  std::string cleanup = std::string("rm -rf ") + dir;
  if (std::system(cleanup.c_str()) != 0) return result ? result : 1;
  return result;
}
