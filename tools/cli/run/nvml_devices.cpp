#include "run/nvml_devices.h"

#include <dlfcn.h>

namespace gpulimit::cli {
namespace {

// The few NVML entry points used here, with the ABI of NVIDIA's nvml.h
// (NVML_API_VERSION 12; tests/fakecuda/nvml/nvml_subset.h declares the same):
// nvmlReturn_t is an int-sized enum, 0 is NVML_SUCCESS, a device is an
// opaque pointer.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned kNvmlUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using ErrorStringFn = const char* (*)(NvmlReturn);
using GetCountFn = NvmlReturn (*)(unsigned*);
using GetHandleByIndexFn = NvmlReturn (*)(unsigned, NvmlDevice*);
using GetUuidFn = NvmlReturn (*)(NvmlDevice, char*, unsigned);

constexpr const char* kLibraryName = "libnvidia-ml.so.1";

class NvmlLibrary {
 public:
  NvmlLibrary() : handle_(dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL)) {}
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  // The library stays loaded: gpulimit execs or exits next, and a driver
  // library is not built to be unloaded (threads, atexit handlers).
  ~NvmlLibrary() {
    if (initialised_) shutdown_();
  }

  bool load(std::string& error) {
    if (!handle_) {
      const char* reason = dlerror();
      error = std::string(kLibraryName) + " cannot be loaded: " + (reason ? reason : "unknown");
      return false;
    }
    return symbol("nvmlInit_v2", init_, error) && symbol("nvmlShutdown", shutdown_, error) &&
           symbol("nvmlErrorString", error_string_, error) &&
           symbol("nvmlDeviceGetCount_v2", get_count_, error) &&
           symbol("nvmlDeviceGetHandleByIndex_v2", get_handle_, error) &&
           symbol("nvmlDeviceGetUUID", get_uuid_, error);
  }

  bool list_uuids(std::vector<std::string>& uuids, std::string& error) {
    if (!check("nvmlInit_v2", init_(), error)) return false;
    initialised_ = true;
    unsigned count = 0;
    if (!check("nvmlDeviceGetCount_v2", get_count_(&count), error)) return false;
    std::vector<std::string> result;
    for (unsigned i = 0; i < count; ++i) {
      NvmlDevice device = nullptr;
      char uuid[kNvmlUuidBufferSize] = {};
      if (!check("nvmlDeviceGetHandleByIndex_v2", get_handle_(i, &device), error) ||
          !check("nvmlDeviceGetUUID", get_uuid_(device, uuid, sizeof(uuid)), error)) {
        return false;
      }
      result.emplace_back(uuid);
    }
    uuids = std::move(result);
    return true;
  }

 private:
  template <typename Fn>
  bool symbol(const char* name, Fn& out, std::string& error) {
    out = reinterpret_cast<Fn>(dlsym(handle_, name));
    if (!out) error = std::string(kLibraryName) + " has no " + name;
    return out != nullptr;
  }

  bool check(const char* call, NvmlReturn result, std::string& error) {
    if (result == kNvmlSuccess) return true;
    const char* text = error_string_(result);
    error = std::string(call) + " failed: " + (text ? text : "unknown error") + " (" +
            std::to_string(result) + ")";
    return false;
  }

  void* handle_;
  bool initialised_ = false;
  InitFn init_ = nullptr;
  ShutdownFn shutdown_ = nullptr;
  ErrorStringFn error_string_ = nullptr;
  GetCountFn get_count_ = nullptr;
  GetHandleByIndexFn get_handle_ = nullptr;
  GetUuidFn get_uuid_ = nullptr;
};

}  // namespace

bool list_gpus(std::vector<std::string>& uuids, std::string& error) {
  NvmlLibrary nvml;
  return nvml.load(error) && nvml.list_uuids(uuids, error);
}

}  // namespace gpulimit::cli
