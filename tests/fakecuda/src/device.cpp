// Devices as CUDA sees them: CUDA_VISIBLE_DEVICES selects and orders the
// machine's devices; a CUdevice is an index into that list.
#include <cstdio>
#include <cstring>

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

int attribute(const VisibleDevice& dev, CUdevice_attribute attrib) {
  const DeviceConfig& c = *dev.config;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      return static_cast<int>(c.sm_count);
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      return static_cast<int>(c.cc_major);
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      return static_cast<int>(c.cc_minor);
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      return static_cast<int>(c.clock_khz);
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      return 6144;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      return 50 << 20;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      return 48 << 10;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      return 227 << 10;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      return 228 << 10;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      return 64 << 10;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      return 2048;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
      return 512;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
      return 32;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      return 0x10 + static_cast<int>(dev.physical);
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      return 0;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      return 5;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
      return 0;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
      return 0;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      return 1;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      return 1;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
      return 0;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      return 1;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
      return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED:
      return 0;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
      return c.cc_major >= 9;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
      return 0;
    // Memory entry points the simulator has (ipc.cpp, stream_memops.cpp).
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
      return static_cast<int>(dev.physical);
    default:
      return 0;
  }
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
  FAKECUDA_REQUIRE(attrib > 0 && attrib < CU_DEVICE_ATTRIBUTE_MAX, CUDA_ERROR_INVALID_VALUE);
  *pi = attribute(*d, attrib);
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
