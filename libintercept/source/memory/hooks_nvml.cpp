// NVML's view of a capped device: total is the cap, free is the cap minus
// what the tenant uses (never more than NVML's own figures), used is the
// rest. The device is matched to the tenant's by UUID, so NVML's numbering
// (which ignores CUDA_VISIBLE_DEVICES) cannot pick the wrong one. A process
// that has not called cuInit has not joined its tenant yet and sees NVML's
// figures unchanged.
#include <algorithm>
#include <cstring>

#include "gpulimit/nvidia/nvml_library.h"
#include "lookup/real_driver.h"
#include "memory/tenant.h"

namespace {

using gpulimit::Tenant;
using gpulimit::nvidia::load_nvml;
using gpulimit::nvidia::NvmlFunctions;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" -> 16 bytes.
bool parse_uuid(const char* text, unsigned char out[16]) {
  if (std::strncmp(text, "GPU-", 4) != 0) return false;
  int nibbles = 0;
  for (const char* c = text + 4; *c && nibbles < 32; ++c) {
    if (*c == '-') continue;
    const int digit = hex_digit(*c);
    if (digit < 0) return false;
    out[nibbles / 2] =
        static_cast<unsigned char>(nibbles % 2 ? (out[nibbles / 2] << 4) | digit : digit);
    ++nibbles;
  }
  return nibbles == 32;
}

// The tenant's cap and use on `device`, when it has a cap there.
bool tenant_view(nvmlDevice_t device, uint64_t* cap, uint64_t* used) {
  Tenant* tenant = Tenant::limited();
  const NvmlFunctions* nvml = load_nvml();
  char text[NVML_DEVICE_UUID_BUFFER_SIZE] = {};
  unsigned char uuid[16];
  return tenant && nvml && nvml->nvmlDeviceGetUUID &&
         nvml->nvmlDeviceGetUUID(device, text, sizeof(text)) == NVML_SUCCESS &&
         parse_uuid(text, uuid) && tenant->view_uuid(uuid, cap, used);
}

// Both versions of NVML's answer, narrowed to the tenant's cap on `device`;
// v2 also says what the driver reserves, which stays within what is used.
template <typename Memory>
nvmlReturn_t narrowed(nvmlReturn_t result, nvmlDevice_t device, Memory* memory) {
  uint64_t cap = 0, used = 0;
  if (result != NVML_SUCCESS || !tenant_view(device, &cap, &used)) return result;
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
