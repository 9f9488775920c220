#include "physical_index.h"

#include <mutex>

#include "diagnostics.h"
#include "gpulimit/nvidia/nvml_library.h"

namespace gpulimit::cupti_trace {
namespace {

using nvidia::NvmlFunctions;

// Loaded once: NVML is a driver component present wherever CUPTI records
// kernels. Initialised once and never shut down, so that a later lookup
// finds it ready; nullptr when it cannot be used.
const NvmlFunctions* nvml() {
  static const NvmlFunctions* usable = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* why = nullptr;
    const NvmlFunctions* loaded = nvidia::load_nvml(&why);
    if (!loaded) {
      say("cannot load libnvidia-ml.so.1 (%s); devices are written as CUPTI numbers them", why);
      return;
    }
    if (!loaded->nvmlInit_v2 || !loaded->nvmlDeviceGetHandleByUUID || !loaded->nvmlDeviceGetIndex) {
      say("libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetHandleByUUID or "
          "nvmlDeviceGetIndex; devices are written as CUPTI numbers them");
      return;
    }
    const nvmlReturn_t initialised = loaded->nvmlInit_v2();
    if (initialised != NVML_SUCCESS) {
      say("nvmlInit_v2 failed (%d); devices are written as CUPTI numbers them",
          static_cast<int>(initialised));
      return;
    }
    usable = loaded;
  });
  return usable;
}

}  // namespace

std::optional<uint32_t> physical_index_of(const char* uuid) {
  const NvmlFunctions* library = nvml();
  if (!library) return std::nullopt;
  nvmlDevice_t device = nullptr;
  unsigned int index = 0;
  if (library->nvmlDeviceGetHandleByUUID(uuid, &device) != NVML_SUCCESS ||
      library->nvmlDeviceGetIndex(device, &index) != NVML_SUCCESS)
    return std::nullopt;
  return index;
}

}  // namespace gpulimit::cupti_trace
