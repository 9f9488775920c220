// Run with libgpulimit.so preloaded on the simulated driver, where a context
// takes 256 MiB of a 4 GiB device, as a tenant capped at 1 GiB on device 0
// and at 128 MiB (less than one context) on device 1: a context is charged
// what it takes from when it is created until it is destroyed, the primary
// context once however often it is retained, and a context over the cap is
// refused with nothing left behind.
#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "gpulimit/nvidia/nvml_subset.h"
#include "preloaded_main.h"

namespace {

constexpr unsigned long long kMiB = 1ull << 20;
constexpr unsigned long long kGiB = 1ull << 30;
constexpr unsigned long long kContext = 256 * kMiB;  // FAKECUDA_CTX_MEM

#define ASSERT_CU(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

class ContextMemory : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));  // joins the tenant
    ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS);
  }
  void TearDown() override { nvmlShutdown(); }

  nvmlDevice_t nvml_device(unsigned index) {
    nvmlDevice_t device = nullptr;
    EXPECT_EQ(nvmlDeviceGetHandleByIndex_v2(index, &device), NVML_SUCCESS);
    return device;
  }

  // What the tenant has left on `device`, seen through NVML, which needs no
  // context (gpulimit narrows it to the cap).
  unsigned long long tenant_free(unsigned device = 0) {
    nvmlMemory_t memory{};
    EXPECT_EQ(nvmlDeviceGetMemoryInfo(nvml_device(device), &memory), NVML_SUCCESS);
    return memory.free;
  }

  // What this process really holds on `device`, as the simulated driver
  // charged it (NVML's process list, which gpulimit does not change).
  unsigned long long held_on_device(unsigned device = 0) {
    nvmlProcessInfo_t infos[64];
    unsigned int count = 64;
    EXPECT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(nvml_device(device), &count, infos),
              NVML_SUCCESS);
    for (unsigned i = 0; i < count; ++i)
      if (infos[i].pid == static_cast<unsigned>(getpid())) return infos[i].usedGpuMemory;
    return 0;
  }

  bool primary_active(CUdevice device) {
    unsigned int flags = 0;
    int active = 0;
    EXPECT_EQ(cuDevicePrimaryCtxGetState(device, &flags, &active), CUDA_SUCCESS);
    return active != 0;
  }
};

TEST_F(ContextMemory, ThePrimaryContextIsChargedOnceWhileRetained) {
  EXPECT_EQ(tenant_free(), kGiB) << "no context yet";
  CUcontext primary = nullptr, again = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&primary, 0));
  EXPECT_EQ(tenant_free(), kGiB - kContext);

  // cuMemGetInfo, in the context, says the same.
  ASSERT_CU(cuCtxSetCurrent(primary));
  size_t free = 0, total = 0;
  ASSERT_CU(cuMemGetInfo_v2(&free, &total));
  EXPECT_EQ(total, kGiB);
  EXPECT_EQ(free, kGiB - kContext);

  ASSERT_CU(cuDevicePrimaryCtxRetain(&again, 0));
  EXPECT_EQ(again, primary);
  EXPECT_EQ(tenant_free(), kGiB - kContext) << "a second retain takes nothing more";
  ASSERT_CU(cuDevicePrimaryCtxRelease_v2(0));
  EXPECT_EQ(tenant_free(), kGiB - kContext) << "still retained once";
  ASSERT_CU(cuDevicePrimaryCtxRelease(0));  // the CUDA 7.0 variant
  EXPECT_FALSE(primary_active(0));
  EXPECT_EQ(tenant_free(), kGiB);
}

TEST_F(ContextMemory, ResettingThePrimaryContextGivesItsChargeBack) {
  CUcontext primary = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&primary, 0));
  ASSERT_CU(cuDevicePrimaryCtxRetain(&primary, 0));
  ASSERT_CU(cuDevicePrimaryCtxReset_v2(0));
  EXPECT_FALSE(primary_active(0));
  EXPECT_EQ(tenant_free(), kGiB);

  ASSERT_CU(cuDevicePrimaryCtxRetain(&primary, 0));
  EXPECT_EQ(tenant_free(), kGiB - kContext);
  ASSERT_CU(cuDevicePrimaryCtxReset(0));  // the CUDA 7.0 variant
  EXPECT_EQ(tenant_free(), kGiB);
}

TEST_F(ContextMemory, CreatedContextsAreChargedUntilDestroyed) {
  CUcontext contexts[4] = {};
  ASSERT_CU(cuCtxCreate(&contexts[0], 0, 0));  // the CUDA 2.0 variant
  EXPECT_EQ(tenant_free(), kGiB - kContext);
  ASSERT_CU(cuCtxCreate_v2(&contexts[1], 0, 0));
  EXPECT_EQ(tenant_free(), kGiB - 2 * kContext);
  ASSERT_CU(cuCtxCreate_v3(&contexts[2], nullptr, 0, 0, 0));
  EXPECT_EQ(tenant_free(), kGiB - 3 * kContext);
  CUctxCreateParams params{};
  ASSERT_CU(cuCtxCreate_v4(&contexts[3], &params, 0, 0));
  EXPECT_EQ(tenant_free(), 0u);
  EXPECT_EQ(held_on_device(), 4 * kContext);

  ASSERT_CU(cuCtxDestroy(contexts[3]));  // the CUDA 2.0 variant
  EXPECT_EQ(tenant_free(), kContext);
  for (int i = 2; i >= 0; --i)
    ASSERT_CU(cuCtxDestroy_v2(contexts[i]));
  EXPECT_EQ(tenant_free(), kGiB);
  EXPECT_EQ(held_on_device(), 0u);
}

TEST_F(ContextMemory, AContextOverTheCapIsRefusedAndLeavesNothingBehind) {
  std::vector<CUcontext> contexts(4);
  for (CUcontext& ctx : contexts)
    ASSERT_CU(cuCtxCreate_v2(&ctx, 0, 0));
  ASSERT_EQ(tenant_free(), 0u) << "four contexts fill the cap";

  auto* const untouched = reinterpret_cast<CUcontext>(0x5a5a);
  CUcontext refused = untouched;
  EXPECT_EQ(cuCtxCreate_v2(&refused, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(refused, untouched);
  CUcontext current = nullptr;
  ASSERT_CU(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, contexts.back()) << "the context stack is as it was";
  EXPECT_EQ(held_on_device(), 4 * kContext) << "the driver holds no fifth context";

  EXPECT_EQ(cuDevicePrimaryCtxRetain(&refused, 0), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(refused, untouched);
  EXPECT_FALSE(primary_active(0));
  EXPECT_EQ(held_on_device(), 4 * kContext);

  ASSERT_CU(cuCtxDestroy_v2(contexts.back()));
  contexts.pop_back();
  CUcontext primary = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&primary, 0)) << "what was given back is there again";
  EXPECT_EQ(tenant_free(), 0u);
  ASSERT_CU(cuDevicePrimaryCtxRelease_v2(0));
  for (CUcontext ctx : contexts)
    ASSERT_CU(cuCtxDestroy_v2(ctx));
  EXPECT_EQ(tenant_free(), kGiB);
}

TEST_F(ContextMemory, TheFirstContextOverTheCapIsMeasuredThenDestroyed) {
  // Device 1's cap is smaller than one context: the first is measured as it
  // is created, found over the cap and destroyed again.
  EXPECT_EQ(tenant_free(1), 128 * kMiB);
  CUcontext primary = nullptr;
  EXPECT_EQ(cuDevicePrimaryCtxRetain(&primary, 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_FALSE(primary_active(1));
  EXPECT_EQ(held_on_device(1), 0u);
  EXPECT_EQ(tenant_free(1), 128 * kMiB);

  // Once measured, the next one is refused before the driver is asked.
  CUcontext ctx = nullptr;
  EXPECT_EQ(cuCtxCreate_v2(&ctx, 0, 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(held_on_device(1), 0u);
  EXPECT_EQ(tenant_free(1), 128 * kMiB);
}

}  // namespace

// The test process is the tenant.
int main(int argc, char** argv) {
  return intercept_test::run_preloaded(argc, argv,
                                       {{"LD_PRELOAD", GPULIMIT_LIBRARY_PATH},
                                        {"GPULIMIT_MEM", "1G"},
                                        {"GPULIMIT_DEVICE_MEM", "1=128M"},
                                        {"GPULIMIT_TENANT", "context-memory"},
                                        {"GPULIMIT_LEDGER_DIR", "$GPULIMIT_TEST_DIR"},
                                        {"FAKECUDA_DEVICES", "2"},
                                        {"FAKECUDA_MEM", "4G"},
                                        {"FAKECUDA_CTX_MEM", "256M"}});
}
