// Devices and contexts as cudart's cudaGetDeviceProperties, cuBLAS and
// PyTorch read them: every attribute answered as an H100 SXM answers it,
// unknown ones refused, the configurable numbers taken from the environment,
// context limits and preferences.
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "config.h"
#include "support.h"

namespace fakecuda::test {
namespace {

int attribute(CUdevice_attribute attrib, CUdevice dev = 0) {
  int value = -12345;
  EXPECT_CU(cuDeviceGetAttribute(&value, attrib, dev)) << "attribute " << attrib;
  return value;
}

// Sets an environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DeviceAttributes, EveryAttributeOfCudaHIsAnswered) {
  ASSERT_CU(cuInit(0));
  for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; ++a) {
    int value = -12345;
    EXPECT_CU(cuDeviceGetAttribute(&value, static_cast<CUdevice_attribute>(a), 0))
        << "attribute " << a;
  }
}

TEST(DeviceAttributes, UnknownAttributesAreInvalidValues) {
  ASSERT_CU(cuInit(0));
  int value = 0;
  EXPECT_EQ(cuDeviceGetAttribute(&value, static_cast<CUdevice_attribute>(0), 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetAttribute(&value, static_cast<CUdevice_attribute>(100000), 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetAttribute(&value, static_cast<CUdevice_attribute>(-1), 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetAttribute(nullptr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0),
            CUDA_ERROR_INVALID_VALUE);
}

TEST(DeviceAttributes, AreThoseOfAnH100Sxm) {
  ASSERT_CU(cuInit(0));
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 132);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE), 1980000);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE), 2619000);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH), 5120);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE), 50 << 20);
  EXPECT_GT(attribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE), 0);
  EXPECT_LE(attribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE), 50 << 20);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR), 228 << 10);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), 227 << 10);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK), 48 << 10);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK), 1 << 10);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR), 65536);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR), 2048);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR), 32);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 9);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), 0);
  for (CUdevice_attribute supported :
       {CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING,
        CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
        CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
        CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
        CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED})
    EXPECT_EQ(attribute(supported), 1) << "attribute " << supported;
  // An x86 host without HMM, not under MPS.
  for (CUdevice_attribute absent :
       {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
        CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, CU_DEVICE_ATTRIBUTE_MPS_ENABLED,
        CU_DEVICE_ATTRIBUTE_INTEGRATED})
    EXPECT_EQ(attribute(absent), 0) << "attribute " << absent;
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_NUMA_CONFIG), CU_DEVICE_NUMA_CONFIG_NONE);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES),
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  // The PCI location NVML reports for the same device.
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1), 0x11);
  EXPECT_EQ(static_cast<unsigned>(attribute(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID)) & 0xffff,
            0x10DEu);
}

TEST(DeviceAttributes, DeprecatedPropertiesAgreeWithTheAttributes) {
  ASSERT_CU(cuInit(0));
  CUdevprop prop{};
  ASSERT_CU(cuDeviceGetProperties(&prop, 0));
  EXPECT_EQ(prop.maxThreadsPerBlock, attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
  EXPECT_EQ(prop.maxThreadsDim[2], attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z));
  EXPECT_EQ(prop.maxGridSize[0], attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X));
  EXPECT_EQ(prop.sharedMemPerBlock, attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
  EXPECT_EQ(prop.SIMDWidth, 32);
  EXPECT_EQ(prop.clockRate, attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE));
  EXPECT_EQ(cuDeviceGetProperties(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetProperties(&prop, 7), CUDA_ERROR_INVALID_DEVICE);
}

TEST(DeviceAttributes, ClocksAndBusWidthFollowTheEnvironment) {
  ScopedEnv clock("FAKECUDA_CLOCK_KHZ", "1755000");
  ScopedEnv memory("FAKECUDA_MEM_CLOCK_KHZ", "3201000");
  ScopedEnv bus("FAKECUDA_BUS_WIDTH", "6144");
  Config config;
  std::string error;
  ASSERT_TRUE(load_config(config, error)) << error;
  EXPECT_EQ(config.machine.devices[0].clock_khz, 1755000u);
  EXPECT_EQ(config.machine.devices[1].mem_clock_khz, 3201000u);
  EXPECT_EQ(config.machine.devices[1].bus_width_bits, 6144u);
}

TEST(DeviceAttributes, MalformedClockIsRefusedNamingTheVariable) {
  ScopedEnv bus("FAKECUDA_BUS_WIDTH", "wide");
  Config config;
  std::string error;
  EXPECT_FALSE(load_config(config, error));
  EXPECT_NE(error.find("FAKECUDA_BUS_WIDTH"), std::string::npos) << error;
}

TEST(DeviceQueries, LinuxHasNoLuidAndNoExecAffinity) {
  ASSERT_CU(cuInit(0));
  char luid[8];
  unsigned mask = 0;
  EXPECT_EQ(cuDeviceGetLuid(luid, &mask, 0), CUDA_ERROR_NOT_SUPPORTED);
  int supported = -1;
  ASSERT_CU(cuDeviceGetExecAffinitySupport(&supported, CU_EXEC_AFFINITY_TYPE_SM_COUNT, 0));
  EXPECT_EQ(supported, 0);
  EXPECT_EQ(cuDeviceGetExecAffinitySupport(&supported, CU_EXEC_AFFINITY_TYPE_MAX, 0),
            CUDA_ERROR_INVALID_VALUE);
}

TEST(DeviceQueries, Texture1DLinearWidthIsTwoToThe28) {
  ASSERT_CU(cuInit(0));
  size_t width = 0;
  ASSERT_CU(cuDeviceGetTexture1DLinearMaxWidth(&width, CU_AD_FORMAT_FLOAT, 4, 0));
  EXPECT_EQ(width, size_t{1} << 28);
  EXPECT_EQ(cuDeviceGetTexture1DLinearMaxWidth(&width, CU_AD_FORMAT_FLOAT, 3, 0),
            CUDA_ERROR_INVALID_VALUE);
}

TEST(DeviceQueries, SmResourceOfDeviceAndContextIsTheWholeDevice) {
  CUcontext ctx = init_primary();
  CUdevResource device{}, context{};
  ASSERT_CU(cuDeviceGetDevResource(0, &device, CU_DEV_RESOURCE_TYPE_SM));
  ASSERT_CU(cuCtxGetDevResource(ctx, &context, CU_DEV_RESOURCE_TYPE_SM));
  EXPECT_EQ(device.type, CU_DEV_RESOURCE_TYPE_SM);
  EXPECT_EQ(device.sm.smCount, 132u);
  EXPECT_EQ(context.sm.smCount, 132u);
  EXPECT_EQ(cuDeviceGetDevResource(0, &device, CU_DEV_RESOURCE_TYPE_INVALID),
            CUDA_ERROR_INVALID_RESOURCE_TYPE);
  CUgreenCtx green = nullptr;
  CUdevResourceDesc desc = reinterpret_cast<CUdevResourceDesc>(&device);
  EXPECT_EQ(cuGreenCtxCreate(&green, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM),
            CUDA_ERROR_NOT_SUPPORTED);
}

TEST(DeviceQueries, FlushingRdmaWritesNeedsAContextAndKnownArguments) {
  ASSERT_CU(cuInit(0));
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  EXPECT_EQ(cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                       CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER),
            CUDA_ERROR_INVALID_CONTEXT);
  init_primary();
  EXPECT_CU(cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                       CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES));
  EXPECT_EQ(cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                       static_cast<CUflushGPUDirectRDMAWritesScope>(1)),
            CUDA_ERROR_INVALID_VALUE);
}

TEST(DeviceLinks, DevicesArePciePeersWithoutNativeAtomics) {
  ASSERT_CU(cuInit(0));
  int value = -1;
  ASSERT_CU(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1));
  EXPECT_EQ(value, 1);
  ASSERT_CU(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, 1, 0));
  EXPECT_EQ(value, 0);
  EXPECT_EQ(cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 0),
            CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetP2PAttribute(&value, static_cast<CUdevice_P2PAttribute>(99), 0, 1),
            CUDA_ERROR_INVALID_VALUE);

  const CUatomicOperation operations[2] = {CU_ATOMIC_OPERATION_INTEGER_ADD,
                                           CU_ATOMIC_OPERATION_FLOAT_ADD};
  unsigned int capabilities[2] = {7, 7};
  ASSERT_CU(cuDeviceGetP2PAtomicCapabilities(capabilities, operations, 2, 0, 1));
  EXPECT_EQ(capabilities[0] | capabilities[1], 0u);
  capabilities[0] = 7;
  ASSERT_CU(cuDeviceGetHostAtomicCapabilities(capabilities, operations, 1, 0));
  EXPECT_EQ(capabilities[0], 0u);
  const CUatomicOperation invalid[1] = {CU_ATOMIC_OPERATION_MAX};
  EXPECT_EQ(cuDeviceGetHostAtomicCapabilities(capabilities, invalid, 1, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetHostAtomicCapabilities(capabilities, operations, 0, 0),
            CUDA_ERROR_INVALID_VALUE);
}

void ignore_notification(CUasyncNotificationInfo*, void*, CUasyncCallbackHandle) {}

TEST(DeviceQueries, NoNvSciSyncAndNoAsyncNotifications) {
  ASSERT_CU(cuInit(0));
  char attributes[64];
  EXPECT_EQ(cuDeviceGetNvSciSyncAttributes(attributes, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
  CUasyncCallbackHandle handle = nullptr;
  EXPECT_EQ(cuDeviceRegisterAsyncNotification(0, ignore_notification, nullptr, &handle),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuDeviceRegisterAsyncNotification(9, ignore_notification, nullptr, &handle),
            CUDA_ERROR_INVALID_DEVICE);
}

// ---- Contexts -------------------------------------------------------------------

TEST(ContextLimits, StartAtTheRealDefaults) {
  CUcontext ctx = nullptr;
  ASSERT_CU(cuInit(0));
  ASSERT_CU(cuCtxCreate_v2(&ctx, 0, 1));
  auto limit = [](CUlimit which) {
    size_t value = 12345;
    EXPECT_CU(cuCtxGetLimit(&value, which)) << "limit " << which;
    return value;
  };
  EXPECT_EQ(limit(CU_LIMIT_STACK_SIZE), 1024u);
  EXPECT_EQ(limit(CU_LIMIT_PRINTF_FIFO_SIZE), 1u << 20);
  EXPECT_EQ(limit(CU_LIMIT_MALLOC_HEAP_SIZE), 8u << 20);
  EXPECT_EQ(limit(CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH), 2u);
  EXPECT_EQ(limit(CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT), 2048u);
  EXPECT_EQ(limit(CU_LIMIT_MAX_L2_FETCH_GRANULARITY), 32u);
  EXPECT_EQ(limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), 0u);
  EXPECT_EQ(limit(CU_LIMIT_SHMEM_SIZE), 227u << 10);
  EXPECT_EQ(limit(CU_LIMIT_CIG_ENABLED), 0u);
  size_t value = 0;
  EXPECT_EQ(cuCtxGetLimit(&value, CU_LIMIT_MAX), CUDA_ERROR_UNSUPPORTED_LIMIT);
  ASSERT_CU(cuCtxDestroy_v2(ctx));
}

TEST(ContextLimits, QueryOnlyLimitsAndOutOfRangeHintsAreRefused) {
  init_primary();
  EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_SHMEM_SIZE, 1024), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_CIG_ENABLED, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuCtxSetLimit(CU_LIMIT_MAX_L2_FETCH_GRANULARITY, 256), CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(cuCtxSetLimit(CU_LIMIT_MAX_L2_FETCH_GRANULARITY, 64));
  // The persisting L2 size is clamped to what the device sets aside.
  ASSERT_CU(cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, size_t{1} << 40));
  size_t value = 0;
  ASSERT_CU(cuCtxGetLimit(&value, CU_LIMIT_PERSISTING_L2_CACHE_SIZE));
  EXPECT_EQ(static_cast<int>(value), attribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE));
  ASSERT_CU(cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0));
  EXPECT_CU(cuCtxResetPersistingL2Cache());
}

TEST(ContextConfig, CacheConfigIsKeptAndSharedMemoryBanksAreFourBytes) {
  init_primary();
  CUfunc_cache cache = CU_FUNC_CACHE_PREFER_L1;
  ASSERT_CU(cuCtxGetCacheConfig(&cache));
  EXPECT_EQ(cache, CU_FUNC_CACHE_PREFER_NONE);
  ASSERT_CU(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
  ASSERT_CU(cuCtxGetCacheConfig(&cache));
  EXPECT_EQ(cache, CU_FUNC_CACHE_PREFER_SHARED);
  EXPECT_EQ(cuCtxSetCacheConfig(static_cast<CUfunc_cache>(7)), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_NONE));

  ASSERT_CU(cuCtxSetSharedMemConfig(CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE));
  CUsharedconfig banks = CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE;
  ASSERT_CU(cuCtxGetSharedMemConfig(&banks));
  EXPECT_EQ(banks, CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE);
  EXPECT_EQ(cuCtxSetSharedMemConfig(static_cast<CUsharedconfig>(9)), CUDA_ERROR_INVALID_VALUE);
}

TEST(ContextConfig, ExecAffinityIsTheWholeDevice) {
  init_primary();
  CUexecAffinityParam affinity{};
  ASSERT_CU(cuCtxGetExecAffinity(&affinity, CU_EXEC_AFFINITY_TYPE_SM_COUNT));
  EXPECT_EQ(affinity.type, CU_EXEC_AFFINITY_TYPE_SM_COUNT);
  EXPECT_EQ(affinity.param.smCount.val, 132u);
  EXPECT_EQ(cuCtxGetExecAffinity(&affinity, CU_EXEC_AFFINITY_TYPE_MAX),
            CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY);
}

TEST(ContextConfig, CallsWithoutAContextAreInvalidContext) {
  ASSERT_CU(cuInit(0));
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  CUfunc_cache cache;
  EXPECT_EQ(cuCtxGetCacheConfig(&cache), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxResetPersistingL2Cache(), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(ContextAttach, DetachingTheLastUserDestroysTheContext) {
  ASSERT_CU(cuInit(0));
  CUcontext ctx = nullptr, attached = nullptr;
  ASSERT_CU(cuCtxCreate_v2(&ctx, 0, 0));
  ASSERT_CU(cuCtxAttach(&attached, 0));
  EXPECT_EQ(attached, ctx);
  EXPECT_EQ(cuCtxAttach(&attached, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuCtxDetach(ctx));  // the attach
  unsigned version = 0;
  EXPECT_CU(cuCtxGetApiVersion(ctx, &version));
  ASSERT_CU(cuCtxDetach(ctx));  // the creator's
  EXPECT_EQ(cuCtxGetApiVersion(ctx, &version), CUDA_ERROR_INVALID_CONTEXT);
}

}  // namespace
}  // namespace fakecuda::test
