// Device memory as every process on the machine sees it: what the processes
// using the simulated libcuda hold, read from the shared state. Memory of a
// process that died is returned before it is counted, as the real driver
// frees it when the process goes.
#include <algorithm>

#include "library.h"

namespace {

struct DeviceMemory {
  uint64_t total;
  uint64_t used;  // never above total, so that free never wraps
};

DeviceMemory read_memory(uint32_t index) {
  const uint64_t total = fakecuda::nvml::machine().devices[index].total_mem;
  return DeviceMemory{total, std::min(fakecuda::nvml::shared_state().used(index), total)};
}

}  // namespace

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
                                                          nvmlMemory_t* memory) {
  uint32_t index = 0;
  if (nvmlReturn_t r = fakecuda::nvml::index_of(device, index); r != NVML_SUCCESS) return r;
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  const DeviceMemory m = read_memory(index);
  // The simulated driver reserves nothing, so v1's used (reserved included)
  // equals v2's.
  memory->total = m.total;
  memory->used = m.used;
  memory->free = m.total - m.used;
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                             nvmlMemory_v2_t* memory) {
  uint32_t index = 0;
  if (nvmlReturn_t r = fakecuda::nvml::index_of(device, index); r != NVML_SUCCESS) return r;
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  // A caller built against another layout must not have it overwritten.
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const DeviceMemory m = read_memory(index);
  memory->total = m.total;
  memory->reserved = 0;
  memory->used = m.used;
  memory->free = m.total - m.used;
  return NVML_SUCCESS;
}
