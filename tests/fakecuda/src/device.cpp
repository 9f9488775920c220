// Devices as CUDA sees them: CUDA_VISIBLE_DEVICES selects and orders the
// machine's devices; a CUdevice is an index into that list.
#include <cstdio>
#include <cstring>
#include <optional>

#include "device_limits.h"
#include "driver.h"

using namespace fakecuda;

namespace {

CUresult checked_device(CUdevice dev, const VisibleDevice** out) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  *out = &d.device(dev);
  return CUDA_SUCCESS;
}

// What an H100/H200 SXM (compute capability 9.0) reports, from the CUDA
// programming guide's tables for 9.0 and public deviceQuery/cudaDeviceProp
// dumps of those boards. Values marked "chosen" were not found in a public
// dump: they are plausible, documented values. std::nullopt for a number that
// is not an attribute (the real driver's CUDA_ERROR_INVALID_VALUE). There is
// no default label: -Wswitch names any attribute a newer cuda.h adds.
std::optional<int> attribute(const VisibleDevice& dev, CUdevice_attribute attrib) {
  const DeviceConfig& c = *dev.config;
  const bool hopper = c.cc_major >= 9;
  switch (attrib) {
    // Launch limits.
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      return kMaxThreadsPerBlock;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      return kWarpSize;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      return static_cast<int>(c.sm_count);
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      return kMaxThreadsPerSm;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      return kMaxBlocksPerSm;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      return kRegistersPerBlock;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      return kRegistersPerSm;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      return kSharedPerBlock;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      return kSharedPerBlockOptin;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      return kSharedPerSm;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
      return kReservedSharedPerBlock;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      return 64 << 10;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
      return hopper;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH:
      return 0;  // deprecated; cuLaunchCooperativeKernelMultiDevice is not simulated
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      return 1;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
      return 0;  // no display attached
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO:
      return 2;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT:
      return hopper ? 4 : 1;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS:
      return 0;  // chosen: needs HMM/ATS, as pageable memory access does
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED:
      return 0;

    // Identity and clocks.
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      return static_cast<int>(c.cc_major);
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      return static_cast<int>(c.cc_minor);
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      return static_cast<int>(c.clock_khz);
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      return static_cast<int>(c.mem_clock_khz);
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      return static_cast<int>(c.bus_width_bits);
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      return kL2CacheBytes;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
      return kMaxPersistingL2Bytes;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
      return 134213632;  // 128 MiB less 4 KiB, as A100 and H100 dumps show
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      return 5;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
      return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
      return 0;  // Linux
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
      return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
      return static_cast<int>(dev.physical);

    // PCI: bus 0x10 + the machine's index, as NVML says (see nvml/devices.cpp).
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      return kFirstPciBus + static_cast<int>(dev.physical);
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      return 0;
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID:
      return static_cast<int>(kPciDeviceVendorId);
    case CU_DEVICE_ATTRIBUTE_GPU_PCI_SUBSYSTEM_ID:
      return 0;  // chosen: NVML's pciSubSystemId says the same
    case CU_DEVICE_ATTRIBUTE_NUMA_CONFIG:
      return CU_DEVICE_NUMA_CONFIG_NONE;  // GPU memory is no NUMA node without C2C
    case CU_DEVICE_ATTRIBUTE_NUMA_ID:
      return -1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
      return 0;  // chosen: the host's first node

    // Memory model: an x86 host without HMM.
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED:
      return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:  // no NVSwitch fabric
    case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:  // chosen: the simulator cannot export dma-bufs
    case CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_MULTINODE_IPC_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      return 0;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
      return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS:
      return CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
      return CU_GPU_DIRECT_RDMA_WRITES_ORDERING_OWNER;
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED:
      return hopper;
    case CU_DEVICE_ATTRIBUTE_D3D12_CIG_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_VULKAN_CIG_SUPPORTED:
      return 0;
    case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK:
    case CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_MAXIMUM_LENGTH:
      return 0;  // the decompression engine is Blackwell's

    // Stream memory operations (cuStreamWaitValue*, cuStreamBatchMemOp).
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
      return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES:
      return 0;

    // Textures and surfaces: the programming guide's limits for 9.0.
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT:
      return 512;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
      return 32;
    case CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH:
      return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT:
      return 65000;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH:
      return 2097120;  // 2 MiB less 32
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH:
      return 268435456;  // 2^28 elements
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH:
      return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE:
      return 8192;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE:
      return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH:
      return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS:
      return 2048;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS:
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS:
      return 2046;

    case CU_DEVICE_ATTRIBUTE_MAX:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

FAKECUDA_EXPORT CUresult cuDeviceGetCount(int* count) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(count, CUDA_ERROR_INVALID_VALUE);
  *count = Driver::get().device_count();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(device, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(Driver::get().valid_device(ordinal), CUDA_ERROR_INVALID_DEVICE);
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(name && len > 0, CUDA_ERROR_INVALID_VALUE);
  std::snprintf(name, static_cast<size_t>(len), "%s", d->config->name);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(uuid, CUDA_ERROR_INVALID_VALUE);
  std::memcpy(uuid->bytes, d->config->uuid, sizeof(uuid->bytes));
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

FAKECUDA_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(bytes, CUDA_ERROR_INVALID_VALUE);
  *bytes = d->config->total_mem;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(pi, CUDA_ERROR_INVALID_VALUE);
  // Compared as an integer first: a number outside the enum's range is no
  // value the switch may be asked about.
  const int number = static_cast<int>(attrib);
  FAKECUDA_REQUIRE(number > 0 && number < CU_DEVICE_ATTRIBUTE_MAX, CUDA_ERROR_INVALID_VALUE);
  const std::optional<int> value = attribute(*d, attrib);
  FAKECUDA_REQUIRE(value, CUDA_ERROR_INVALID_VALUE);
  *pi = *value;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(major && minor, CUDA_ERROR_INVALID_VALUE);
  *major = static_cast<int>(d->config->cc_major);
  *minor = static_cast<int>(d->config->cc_minor);
  return CUDA_SUCCESS;
}

// Bus ids follow the machine's index: 0000:10:00.0 for device 0, as NVML's
// 00000000:10:00.0 (see nvml/), so that both sides name the same device.
FAKECUDA_EXPORT CUresult cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(pciBusId && len > 0, CUDA_ERROR_INVALID_VALUE);
  std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02X:00.0", 0x10 + d->physical);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(dev && pciBusId, CUDA_ERROR_INVALID_VALUE);
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4)
    return CUDA_ERROR_INVALID_VALUE;
  Driver& d = Driver::get();
  for (int i = 0; i < d.device_count(); ++i) {
    if (domain == 0 && device == 0 && function == 0 && bus == 0x10 + d.device(i).physical) {
      *dev = i;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

FAKECUDA_EXPORT CUresult cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peer) {
  const VisibleDevice* a = nullptr;
  const VisibleDevice* b = nullptr;
  if (CUresult r = checked_device(dev, &a); r != CUDA_SUCCESS) return r;
  if (CUresult r = checked_device(peer, &b); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(canAccessPeer, CUDA_ERROR_INVALID_VALUE);
  *canAccessPeer = dev != peer;
  return CUDA_SUCCESS;
}

// Deprecated since CUDA 5 but still exported: the attributes of CUdevprop.
FAKECUDA_EXPORT CUresult cuDeviceGetProperties(CUdevprop* prop, CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(prop, CUDA_ERROR_INVALID_VALUE);
  auto get = [&](CUdevice_attribute a) { return *attribute(*d, a); };
  prop->maxThreadsPerBlock = get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  prop->maxThreadsDim[0] = get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  prop->maxThreadsDim[1] = get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  prop->maxThreadsDim[2] = get(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  prop->maxGridSize[0] = get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  prop->maxGridSize[1] = get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  prop->maxGridSize[2] = get(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  prop->sharedMemPerBlock = get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  prop->totalConstantMemory = get(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
  prop->SIMDWidth = get(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  prop->memPitch = get(CU_DEVICE_ATTRIBUTE_MAX_PITCH);
  prop->regsPerBlock = get(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  prop->clockRate = get(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  prop->textureAlign = get(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
  return CUDA_SUCCESS;
}

// The widest 1D texture over linear memory: 2^28 elements of any format, the
// programming guide's limit for 9.0.
FAKECUDA_EXPORT CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t* maxWidthInElements,
                                                            CUarray_format format,
                                                            unsigned numChannels, CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(maxWidthInElements, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(numChannels == 1 || numChannels == 2 || numChannels == 4,
                   CUDA_ERROR_INVALID_VALUE);
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_FLOAT:
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  *maxWidthInElements = size_t{1} << 28;
  return CUDA_SUCCESS;
}

// Execution affinity (SM-limited contexts) needs MPS, which is off.
FAKECUDA_EXPORT CUresult cuDeviceGetExecAffinitySupport(int* pi, CUexecAffinityType type,
                                                        CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(pi, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(type == CU_EXEC_AFFINITY_TYPE_SM_COUNT, CUDA_ERROR_INVALID_VALUE);
  *pi = 0;
  return CUDA_SUCCESS;
}

// LUIDs are a Windows (WDDM) notion: the Linux driver has none to give.
FAKECUDA_EXPORT CUresult cuDeviceGetLuid(char* luid, unsigned int* deviceNodeMask, CUdevice dev) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(luid && deviceNodeMask, CUDA_ERROR_INVALID_VALUE);
  return CUDA_ERROR_NOT_SUPPORTED;
}

// Nothing writes to simulated memory behind the host's back, so there is
// never anything to flush; the arguments are checked as documented.
FAKECUDA_EXPORT CUresult cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
                                                    CUflushGPUDirectRDMAWritesScope scope) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(target == CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(scope == CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER ||
                       scope == CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES,
                   CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  FAKECUDA_REQUIRE(live_context(current_context()), CUDA_ERROR_INVALID_CONTEXT);
  return CUDA_SUCCESS;
}

// ---- Device resources (green contexts) ------------------------------------------

namespace {

// The SMs of a device or context as one resource. Hopper splits SMs into
// groups of at least 8, in multiples of 8 (cuDevSmResourceSplitByCount).
CUresult describe_sm_resource(const DeviceConfig& config, CUdevResource* resource,
                              CUdevResourceType type) {
  FAKECUDA_REQUIRE(resource, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(type == CU_DEV_RESOURCE_TYPE_SM, CUDA_ERROR_INVALID_RESOURCE_TYPE);
  std::memset(resource, 0, sizeof(*resource));
  resource->type = CU_DEV_RESOURCE_TYPE_SM;
  resource->sm.smCount = config.sm_count;
  resource->sm.minSmPartitionSize = 8;
  resource->sm.smCoscheduledAlignment = 8;
  return CUDA_SUCCESS;
}

}  // namespace

FAKECUDA_EXPORT CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource* resource,
                                                CUdevResourceType type) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(device, &d); r != CUDA_SUCCESS) return r;
  return describe_sm_resource(*d->config, resource, type);
}

FAKECUDA_EXPORT CUresult cuCtxGetDevResource(CUcontext hCtx, CUdevResource* resource,
                                             CUdevResourceType type) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(live_context(hCtx), CUDA_ERROR_INVALID_CONTEXT);
  return describe_sm_resource(*d.device(hCtx->ordinal).config, resource, type);
}

// Green contexts themselves are not simulated: refused as by a driver that
// cannot partition the device.
FAKECUDA_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev,
                                          unsigned int) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(phCtx && desc, CUDA_ERROR_INVALID_VALUE);
  return CUDA_ERROR_NOT_SUPPORTED;
}

// ---- Platform features an x86 Linux machine does not have -----------------------

// NvSciSync interop is a Tegra/automotive feature.
FAKECUDA_EXPORT CUresult cuDeviceGetNvSciSyncAttributes(void* nvSciSyncAttrList, CUdevice dev,
                                                        int) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(dev, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(nvSciSyncAttrList, CUDA_ERROR_INVALID_VALUE);
  return CUDA_ERROR_NOT_SUPPORTED;
}

// Async notifications (memory budget changes) are sent on platforms that
// budget device memory; this one does not, so none can be registered.
FAKECUDA_EXPORT CUresult cuDeviceRegisterAsyncNotification(CUdevice device,
                                                           CUasyncCallback callbackFunc, void*,
                                                           CUasyncCallbackHandle* callback) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(device, &d); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(callbackFunc && callback, CUDA_ERROR_INVALID_VALUE);
  return CUDA_ERROR_NOT_SUPPORTED;
}

FAKECUDA_EXPORT CUresult cuDeviceUnregisterAsyncNotification(CUdevice device,
                                                             CUasyncCallbackHandle) {
  const VisibleDevice* d = nullptr;
  if (CUresult r = checked_device(device, &d); r != CUDA_SUCCESS) return r;
  return CUDA_ERROR_NOT_SUPPORTED;
}
