// NVML's view of a capped device: total is the cap, free is the cap minus
// what the tenant uses (never more than NVML's own figures), used is the
// rest. The device is matched to the tenant's by UUID, so NVML's numbering
// (which ignores CUDA_VISIBLE_DEVICES) cannot pick the wrong one. A process
// that has not called cuInit yet sees the caps of its own limits already
// (tools size themselves from NVML before they take CUDA); a cap only the
// server grants comes with the server's answer, at cuInit.
#include <algorithm>
#include <cstring>

#include "gpulimit/nvidia/nvml_library.h"
#include "gpulimit/options/values.h"
#include "lookup/real_driver.h"
#include "memory/tenant.h"

namespace {

using gpulimit::Tenant;
using gpulimit::nvidia::load_nvml;
using gpulimit::nvidia::NvmlFunctions;

// The tenant's cap and use on `device` (of `device_total` bytes), when it
// has a cap there.
bool tenant_view(nvmlDevice_t device, uint64_t device_total, uint64_t* cap, uint64_t* used) {
  if (!Tenant::limited() && Tenant::refused()) return false;
  const NvmlFunctions* nvml = load_nvml();
  char text[NVML_DEVICE_UUID_BUFFER_SIZE] = {};
  gpulimit::options::DeviceUuid uuid;
  if (!nvml || !nvml->nvmlDeviceGetUUID ||
      nvml->nvmlDeviceGetUUID(device, text, sizeof(text)) != NVML_SUCCESS ||
      !gpulimit::options::parse_device_uuid(text, uuid))
    return false;
  if (Tenant* tenant = Tenant::limited()) return tenant->view_uuid(uuid.data(), cap, used);
  return Tenant::view_before_init(uuid.data(), device_total, cap, used);
}

// Both versions of NVML's answer, narrowed to the tenant's cap on `device`;
// v2 also says what the driver reserves, which stays within what is used.
template <typename Memory>
nvmlReturn_t narrowed(nvmlReturn_t result, nvmlDevice_t device, Memory* memory) {
  uint64_t cap = 0, used = 0;
  if (result != NVML_SUCCESS || !tenant_view(device, memory->total, &cap, &used)) return result;
  uint64_t total = memory->total, free = memory->free;
  gpulimit::narrow_to_cap(cap, used, total, free);
  memory->total = total;
  memory->free = free;
  if constexpr (requires { memory->reserved; }) {
    memory->reserved = std::min<uint64_t>(memory->reserved, total - free);
    memory->used = total - free - memory->reserved;
  } else {
    memory->used = total - free;
  }
  return result;
}

}  // namespace

GPULIMIT_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  const NvmlFunctions* nvml = load_nvml();
  if (!nvml || !nvml->nvmlDeviceGetMemoryInfo) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return narrowed(nvml->nvmlDeviceGetMemoryInfo(device, memory), device, memory);
}

GPULIMIT_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                        nvmlMemory_v2_t* memory) {
  const NvmlFunctions* nvml = load_nvml();
  if (!nvml || !nvml->nvmlDeviceGetMemoryInfo_v2) return NVML_ERROR_FUNCTION_NOT_FOUND;
  return narrowed(nvml->nvmlDeviceGetMemoryInfo_v2(device, memory), device, memory);
}
