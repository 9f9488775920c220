// Run with libgpulimit.so preloaded on the simulated driver, as a tenant
// capped at 1 GiB (ctest sets the environment): NVML, reached by its linked
// symbols or by dlopen+dlsym as pynvml does, reports the cap, and the tenant's
// allocations come off its free memory.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "gpulimit/nvidia/nvml_subset.h"
#include "preloaded_main.h"

namespace {

constexpr unsigned long long kMiB = 1ull << 20;
constexpr unsigned long long kGiB = 1ull << 30;

class NvmlView : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);  // joins the tenant
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
    ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(0, &device_), NVML_SUCCESS);
  }
  void TearDown() override { nvmlShutdown(); }
  CUcontext ctx_ = nullptr;
  nvmlDevice_t device_ = nullptr;
};

TEST_F(NvmlView, ReportsTheCapThroughEveryPath) {
  nvmlMemory_t v1{};
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(device_, &v1), NVML_SUCCESS);
  EXPECT_EQ(v1.total, kGiB);
  EXPECT_EQ(v1.free + v1.used, v1.total);

  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  ASSERT_NE(nvml, nullptr);
  auto get_v2 = reinterpret_cast<decltype(&nvmlDeviceGetMemoryInfo_v2)>(
      dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2"));
  ASSERT_NE(get_v2, nullptr);
  nvmlMemory_v2_t v2{};
  v2.version = nvmlMemory_v2;
  ASSERT_EQ(get_v2(device_, &v2), NVML_SUCCESS);
  EXPECT_EQ(v2.total, kGiB);
  EXPECT_EQ(v2.free + v2.used + v2.reserved, v2.total);
}

TEST_F(NvmlView, TheTenantsAllocationsComeOffItsFreeMemory) {
  // The primary context counts too: what is free before is less than the cap.
  nvmlMemory_t before{};
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(device_, &before), NVML_SUCCESS);
  EXPECT_LT(before.free, kGiB);
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc_v2(&p, 256 * kMiB), CUDA_SUCCESS);
  nvmlMemory_t memory{};
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(device_, &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.free, before.free - 256 * kMiB);
  ASSERT_EQ(cuMemFree_v2(p), CUDA_SUCCESS);
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(device_, &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.free, before.free);
}

TEST_F(NvmlView, ErrorsAreNvmlsOwn) {
  EXPECT_EQ(nvmlDeviceGetMemoryInfo(device_, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  nvmlMemory_v2_t wrong{};
  wrong.version = 1;
  EXPECT_EQ(nvmlDeviceGetMemoryInfo_v2(device_, &wrong), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

}  // namespace

// The test process is the tenant.
int main(int argc, char** argv) {
  return intercept_test::run_preloaded(argc, argv,
                                       {{"LD_PRELOAD", GPULIMIT_LIBRARY_PATH},
                                        {"GPULIMIT_MEM", "1G"},
                                        {"GPULIMIT_TENANT", "nvml-view"},
                                        {"GPULIMIT_LEDGER_DIR", "$GPULIMIT_TEST_DIR"}});
}
