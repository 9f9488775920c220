// The machine's GPUs by NVML index, for a policy file that names a device by
// its index: the same numbering as nvidia-smi, whatever CUDA_VISIBLE_DEVICES
// a job has. NVML is loaded when such a file is read, never otherwise, so
// gpulimitd starts on machines without a driver.
#include <dlfcn.h>

#include "gpulimit/server/policy/policy_file.h"

namespace gpulimit::server {
namespace {

// The NVML entry points used here, with the ABI of NVIDIA's nvml.h
// (NVML_API_VERSION 12): nvmlReturn_t is an int-sized enum, 0 is success, a
// device is an opaque pointer.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

template <typename Fn>
Fn symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

}  // namespace

Result<std::vector<GpuUuid>> nvml_gpu_uuids() {
  // Stays loaded: a driver library is not built to be unloaded.
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    return fail(std::string("libnvidia-ml.so.1 cannot be loaded: ") + (why ? why : "unknown"));
  }
  const auto init = symbol<NvmlReturn (*)()>(library, "nvmlInit_v2");
  const auto shutdown = symbol<NvmlReturn (*)()>(library, "nvmlShutdown");
  const auto count_of = symbol<NvmlReturn (*)(unsigned*)>(library, "nvmlDeviceGetCount_v2");
  const auto handle_of =
      symbol<NvmlReturn (*)(unsigned, NvmlDevice*)>(library, "nvmlDeviceGetHandleByIndex_v2");
  const auto uuid_of =
      symbol<NvmlReturn (*)(NvmlDevice, char*, unsigned)>(library, "nvmlDeviceGetUUID");
  if (!init || !shutdown || !count_of || !handle_of || !uuid_of)
    return fail("libnvidia-ml.so.1 lacks a function gpulimitd needs");
  if (NvmlReturn failed = init(); failed != 0)
    return fail("nvmlInit_v2 failed (" + std::to_string(failed) + ")");
  std::vector<GpuUuid> uuids;
  unsigned count = 0;
  NvmlReturn failed = count_of(&count);
  for (unsigned i = 0; failed == 0 && i < count; ++i) {
    NvmlDevice device = nullptr;
    char text[kUuidBufferSize] = {};
    failed = handle_of(i, &device);
    if (failed == 0) failed = uuid_of(device, text, sizeof text);
    GpuUuid uuid{};
    if (failed == 0 && !parse_gpu_uuid(text, uuid)) failed = -1;
    uuids.push_back(uuid);
  }
  shutdown();
  if (failed != 0) return fail("NVML cannot list the GPUs (" + std::to_string(failed) + ")");
  return uuids;
}

}  // namespace gpulimit::server
