// The driver and NVML describe one machine: the same devices (matched by
// UUID, whatever CUDA_VISIBLE_DEVICES does to CUDA's numbering) and the same
// memory, down to each process.
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "nvml_device_queries.h"
#include "support.h"

namespace fakecuda::test {
namespace {

std::string uuid_text(const CUuuid& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  char text[64];
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

class CudaAndNvml : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(nvmlInit_v2(), NVML_SUCCESS); }
  void TearDown() override { nvmlShutdown(); }
};

TEST_F(CudaAndNvml, DescribeTheSameDevices) {
  ASSERT_CU(cuInit(0));
  int count = 0;
  ASSERT_CU(cuDeviceGetCount(&count));
  unsigned nvml_count = 0;
  ASSERT_EQ(nvmlDeviceGetCount_v2(&nvml_count), NVML_SUCCESS);
  ASSERT_EQ(static_cast<int>(nvml_count), count);
  for (int i = 0; i < count; ++i) {
    CUuuid uuid;
    ASSERT_CU(cuDeviceGetUuid_v2(&uuid, i));
    nvmlDevice_t device = nullptr;
    ASSERT_EQ(nvmlDeviceGetHandleByUUID(uuid_text(uuid).c_str(), &device), NVML_SUCCESS);
    char bus[32];
    ASSERT_CU(cuDeviceGetPCIBusId(bus, sizeof(bus), i));
    nvmlPciInfo_t pci{};
    ASSERT_EQ(nvmlDeviceGetPciInfo_v3(device, &pci), NVML_SUCCESS);
    EXPECT_STREQ(pci.busIdLegacy, bus);
    size_t total = 0;
    ASSERT_CU(cuDeviceTotalMem_v2(&total, i));
    nvmlMemory_t memory{};
    ASSERT_EQ(nvmlDeviceGetMemoryInfo(device, &memory), NVML_SUCCESS);
    EXPECT_EQ(memory.total, total);
  }
}

TEST_F(CudaAndNvml, ReorderedCudaDevicesAreFoundByUuid) {
  // CUDA ordinal 0 of a process with CUDA_VISIBLE_DEVICES=1,0 is NVML's 1.
  std::istringstream out(run_helper({"devices"}, {{"CUDA_VISIBLE_DEVICES", "1,0"}}));
  std::string count, ordinal, hex;
  out >> count >> ordinal >> hex;
  ASSERT_EQ(count, "2");
  ASSERT_EQ(ordinal, "0");
  ASSERT_EQ(hex.size(), 32u);
  CUuuid uuid;
  for (int i = 0; i < 16; ++i)
    uuid.bytes[i] =
        static_cast<char>(std::stoi(hex.substr(static_cast<size_t>(2 * i), 2), nullptr, 16));
  nvmlDevice_t device = nullptr;
  ASSERT_EQ(nvmlDeviceGetHandleByUUID(uuid_text(uuid).c_str(), &device), NVML_SUCCESS);
  unsigned index = 99;
  ASSERT_EQ(nvmlDeviceGetIndex(device, &index), NVML_SUCCESS);
  EXPECT_EQ(index, 1u);
}

TEST_F(CudaAndNvml, AgreeOnMemoryDownToEachProcess) {
  init_primary(1);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, 1ull << 30));
  size_t free = 0, total = 0;
  ASSERT_CU(cuMemGetInfo_v2(&free, &total));
  nvmlDevice_t device = nullptr;
  ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(1, &device), NVML_SUCCESS);
  nvmlMemory_t memory{};
  ASSERT_EQ(nvmlDeviceGetMemoryInfo(device, &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.used, total - free);
  EXPECT_EQ(memory.free, free);

  nvmlProcessInfo_t processes[8];
  unsigned n = 8;
  ASSERT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(device, &n, processes), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(processes[0].pid, static_cast<unsigned>(getpid()));
  EXPECT_EQ(processes[0].usedGpuMemory, (1ull << 30) + (64ull << 20)) << "memory and context";
  ASSERT_CU(cuMemFree_v2(p));
  n = 8;
  ASSERT_EQ(nvmlDeviceGetComputeRunningProcesses_v3(device, &n, processes), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(processes[0].usedGpuMemory, 64ull << 20);
}

TEST_F(CudaAndNvml, KernelsOfThisProcessShowAsUtilization) {
  // Device 1: what this test runs is all that runs there in a fresh process.
  init_primary(1);
  unsigned long long ns = 200'000'000;
  unsigned long long* counter = nullptr;
  void* params[] = {&ns, &counter};
  ASSERT_CU(cuLaunchKernel(spin_kernel(), 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  nvmlDevice_t device = nullptr;
  ASSERT_EQ(nvmlDeviceGetHandleByIndex_v2(1, &device), NVML_SUCCESS);
  nvmlUtilization_t rates{};
  ASSERT_EQ(nvmlDeviceGetUtilizationRates(device, &rates), NVML_SUCCESS);
  EXPECT_GT(rates.gpu, 0u);
  unsigned int count = 8;
  nvmlProcessUtilizationSample_t samples[8];
  ASSERT_EQ(nvmlDeviceGetProcessUtilization(device, samples, &count, 0), NVML_SUCCESS);
  bool mine = false;
  for (unsigned int i = 0; i < count; ++i)
    mine = mine || (samples[i].pid == static_cast<unsigned>(getpid()) && samples[i].smUtil > 0);
  EXPECT_TRUE(mine);
}

}  // namespace
}  // namespace fakecuda::test
