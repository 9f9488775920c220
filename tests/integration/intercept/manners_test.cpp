// How libgpulimit.so behaves inside someone else's process, run with it
// preloaded (behind getenv_counter.so) on the simulated driver as a capped
// tenant: the pitfalls CUDA-NOTES lists of other interposers.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <array>
#include <cstring>

#include "preloaded_main.h"

namespace {

constexpr size_t kMiB = 1u << 20;

long getenv_calls_from_gpulimit() {
  using Count = long (*)();
  static Count count = reinterpret_cast<Count>(dlsym(RTLD_DEFAULT, "getenv_calls_from_gpulimit"));
  return count ? count() : -1;
}

void application_handler(int) {}

using Dispositions = std::array<struct sigaction, NSIG>;

Dispositions dispositions() {
  Dispositions all{};
  for (int signal = 1; signal < NSIG; ++signal)
    sigaction(signal, nullptr, &all[static_cast<size_t>(signal)]);
  return all;
}

bool same(const struct sigaction& a, const struct sigaction& b) {
  return a.sa_handler == b.sa_handler && a.sa_flags == b.sa_flags;
}

// Runs first in the process: CUDA is not initialised until this test does.
TEST(LibraryManners, LeavesEverySignalDispositionAsTheApplicationSetIt) {
  struct sigaction usr1 {};
  usr1.sa_handler = application_handler;
  ASSERT_EQ(sigaction(SIGUSR1, &usr1, nullptr), 0);
  const Dispositions before = dispositions();

  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);  // attaches to the tenant's ledger
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_v2(&p, kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);

  const Dispositions after = dispositions();
  for (int signal = 1; signal < NSIG; ++signal)
    EXPECT_TRUE(same(before[static_cast<size_t>(signal)], after[static_cast<size_t>(signal)]))
        << "signal " << signal << " (" << strsignal(signal) << ") changed";
}

TEST(LibraryManners, NeverReadsTheEnvironmentOnceAttached) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  const long before = getenv_calls_from_gpulimit();
  ASSERT_GE(before, 0) << "getenv_counter.so is not preloaded";

  for (int i = 0; i < 1000; ++i) {
    CUdeviceptr p = 0;
    ASSERT_EQ(cuMemAlloc_v2(&p, kMiB), CUDA_SUCCESS);
    size_t free = 0, total = 0;
    ASSERT_EQ(cuMemGetInfo_v2(&free, &total), CUDA_SUCCESS);
    ASSERT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
    // A launch of no function: the driver refuses it, through the hook.
    EXPECT_NE(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
              CUDA_SUCCESS);
  }

  EXPECT_EQ(getenv_calls_from_gpulimit(), before);
}

}  // namespace

int main(int argc, char** argv) {
  return intercept_test::run_preloaded(
      argc, argv,
      {{"LD_PRELOAD", std::string(GETENV_COUNTER_PATH) + ":" + GPULIMIT_LIBRARY_PATH},
       {"GPULIMIT_MEM", "1G"},
       {"GPULIMIT_TENANT", "manners"},
       {"GPULIMIT_LEDGER_DIR", "$GPULIMIT_TEST_DIR"}});
}
