// The machine's GPUs by NVML index, for a policy file that names a device by
// its index: the same numbering as nvidia-smi, whatever CUDA_VISIBLE_DEVICES
// a job has; also the list of GPUs a Hello may name (machine_gpus.h). A
// machine without NVML gets a failure here, never a failed start.
#include "gpulimit/nvidia/nvml_library.h"
#include "gpulimit/server/policy/policy_file.h"

namespace gpulimit::server {

Result<std::vector<GpuUuid>> nvml_gpu_uuids() {
  using nvidia::kNvmlLibraryName;
  const char* why = nullptr;
  const nvidia::NvmlFunctions* nvml = nvidia::load_nvml(&why);
  if (!nvml) return fail(std::string(kNvmlLibraryName) + " cannot be loaded: " + why);
  if (!nvml->nvmlInit_v2 || !nvml->nvmlShutdown || !nvml->nvmlDeviceGetCount_v2 ||
      !nvml->nvmlDeviceGetHandleByIndex_v2 || !nvml->nvmlDeviceGetUUID)
    return fail(std::string(kNvmlLibraryName) + " lacks a function gpulimitd needs");
  if (nvmlReturn_t failed = nvml->nvmlInit_v2(); failed != NVML_SUCCESS)
    return fail("nvmlInit_v2 failed (" + std::to_string(static_cast<int>(failed)) + ")");
  std::vector<GpuUuid> uuids;
  unsigned count = 0;
  int failed = nvml->nvmlDeviceGetCount_v2(&count);
  for (unsigned i = 0; failed == NVML_SUCCESS && i < count; ++i) {
    nvmlDevice_t device = nullptr;
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    failed = nvml->nvmlDeviceGetHandleByIndex_v2(i, &device);
    if (failed == NVML_SUCCESS) failed = nvml->nvmlDeviceGetUUID(device, text, sizeof text);
    GpuUuid uuid{};
    if (failed == NVML_SUCCESS && !parse_gpu_uuid(text, uuid)) failed = -1;  // not a UUID
    uuids.push_back(uuid);
  }
  nvml->nvmlShutdown();
  if (failed != NVML_SUCCESS)
    return fail("NVML cannot list the GPUs (" + std::to_string(failed) + ")");
  return uuids;
}

}  // namespace gpulimit::server
