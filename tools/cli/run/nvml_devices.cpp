#include "run/nvml_devices.h"

#include "gpulimit/nvidia/nvml_library.h"

namespace gpulimit::cli {
namespace {

using nvidia::kNvmlLibraryName;
using nvidia::NvmlFunctions;

template <typename Fn>
bool present(Fn fn, const char* name, std::string& error) {
  if (!fn) error = std::string(kNvmlLibraryName) + " has no " + name;
  return fn != nullptr;
}

// NVML initialised for one listing, and shut down after it (the library
// itself stays loaded: gpulimit execs or exits next, and a driver library is
// not built to be unloaded).
class NvmlSession {
 public:
  explicit NvmlSession(const NvmlFunctions& nvml) : nvml_(nvml) {}
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;
  ~NvmlSession() {
    if (initialised_) nvml_.nvmlShutdown();
  }

  // Whether this NVML has every function the listing calls.
  static bool usable(const NvmlFunctions& nvml, std::string& error) {
    return present(nvml.nvmlInit_v2, "nvmlInit_v2", error) &&
           present(nvml.nvmlShutdown, "nvmlShutdown", error) &&
           present(nvml.nvmlErrorString, "nvmlErrorString", error) &&
           present(nvml.nvmlDeviceGetCount_v2, "nvmlDeviceGetCount_v2", error) &&
           present(nvml.nvmlDeviceGetHandleByIndex_v2, "nvmlDeviceGetHandleByIndex_v2", error) &&
           present(nvml.nvmlDeviceGetUUID, "nvmlDeviceGetUUID", error);
  }

  bool list_uuids(std::vector<std::string>& uuids, std::string& error) {
    if (!check("nvmlInit_v2", nvml_.nvmlInit_v2(), error)) return false;
    initialised_ = true;
    unsigned count = 0;
    if (!check("nvmlDeviceGetCount_v2", nvml_.nvmlDeviceGetCount_v2(&count), error)) return false;
    std::vector<std::string> result;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t device = nullptr;
      char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      if (!check("nvmlDeviceGetHandleByIndex_v2", nvml_.nvmlDeviceGetHandleByIndex_v2(i, &device),
                 error) ||
          !check("nvmlDeviceGetUUID", nvml_.nvmlDeviceGetUUID(device, uuid, sizeof(uuid)), error)) {
        return false;
      }
      result.emplace_back(uuid);
    }
    uuids = std::move(result);
    return true;
  }

 private:
  bool check(const char* call, nvmlReturn_t result, std::string& error) {
    if (result == NVML_SUCCESS) return true;
    const char* text = nvml_.nvmlErrorString(result);
    error = std::string(call) + " failed: " + (text ? text : "unknown error") + " (" +
            std::to_string(static_cast<int>(result)) + ")";
    return false;
  }

  const NvmlFunctions& nvml_;
  bool initialised_ = false;
};

}  // namespace

bool list_gpus(std::vector<std::string>& uuids, std::string& error) {
  const char* reason = nullptr;
  const NvmlFunctions* nvml = nvidia::load_nvml(&reason);
  if (!nvml) {
    error = std::string(kNvmlLibraryName) + " cannot be loaded: " + reason;
    return false;
  }
  if (!NvmlSession::usable(*nvml, error)) return false;
  NvmlSession session(*nvml);
  return session.list_uuids(uuids, error);
}

}  // namespace gpulimit::cli
