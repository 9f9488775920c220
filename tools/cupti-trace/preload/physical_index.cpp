#include "physical_index.h"

#include <dlfcn.h>

#include <mutex>

#include "diagnostics.h"
#include "gpulimit/nvidia/nvml_subset.h"

namespace gpulimit::cupti_trace {
namespace {

struct Nvml {
  decltype(&nvmlDeviceGetHandleByUUID) handle_by_uuid = nullptr;
  decltype(&nvmlDeviceGetIndex) index = nullptr;
  bool usable = false;
};

// Loaded once: NVML is a driver component present wherever CUPTI records
// kernels. Never shut down, so that a later lookup finds it ready.
const Nvml& nvml() {
  static Nvml loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      say("cannot load libnvidia-ml.so.1 (%s); devices are written as CUPTI numbers them",
          dlerror());
      return;
    }
    auto init = reinterpret_cast<decltype(&nvmlInit_v2)>(dlsym(library, "nvmlInit_v2"));
    loaded.handle_by_uuid = reinterpret_cast<decltype(&nvmlDeviceGetHandleByUUID)>(
        dlsym(library, "nvmlDeviceGetHandleByUUID"));
    loaded.index =
        reinterpret_cast<decltype(&nvmlDeviceGetIndex)>(dlsym(library, "nvmlDeviceGetIndex"));
    if (!init || !loaded.handle_by_uuid || !loaded.index) {
      say("libnvidia-ml.so.1 lacks nvmlInit_v2, nvmlDeviceGetHandleByUUID or "
          "nvmlDeviceGetIndex; devices are written as CUPTI numbers them");
      return;
    }
    const nvmlReturn_t initialised = init();
    if (initialised != NVML_SUCCESS) {
      say("nvmlInit_v2 failed (%d); devices are written as CUPTI numbers them",
          static_cast<int>(initialised));
      return;
    }
    loaded.usable = true;
  });
  return loaded;
}

}  // namespace

std::optional<uint32_t> physical_index_of(const char* uuid) {
  const Nvml& library = nvml();
  if (!library.usable) return std::nullopt;
  nvmlDevice_t device = nullptr;
  unsigned int index = 0;
  if (library.handle_by_uuid(uuid, &device) != NVML_SUCCESS ||
      library.index(device, &index) != NVML_SUCCESS)
    return std::nullopt;
  return index;
}

}  // namespace gpulimit::cupti_trace
