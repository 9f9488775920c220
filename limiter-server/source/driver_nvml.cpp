#include "gpulimit/server/driver_nvml.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "gpulimit/nvidia/nvml_library.h"

namespace gpulimit::server {

using nvidia::kNvmlLibraryName;
using nvidia::NvmlFunctions;

// The NVML calls the cross-check makes, on a library that has them all.
class NvmlLibrary {
 public:
  static Result<std::unique_ptr<NvmlLibrary>> load() {
    const char* reason = nullptr;
    const NvmlFunctions* functions = nvidia::load_nvml(&reason);
    if (!functions) return fail(std::string(kNvmlLibraryName) + " cannot be loaded: " + reason);
    std::unique_ptr<NvmlLibrary> nvml(new NvmlLibrary(*functions));
    std::string error;
    if (!present(functions->nvmlInit_v2, "nvmlInit_v2", error) ||
        !present(functions->nvmlErrorString, "nvmlErrorString", error) ||
        !present(functions->nvmlDeviceGetCount_v2, "nvmlDeviceGetCount_v2", error) ||
        !present(functions->nvmlDeviceGetHandleByIndex_v2, "nvmlDeviceGetHandleByIndex_v2",
                 error) ||
        !present(functions->nvmlDeviceGetUUID, "nvmlDeviceGetUUID", error) ||
        !present(functions->nvmlDeviceGetComputeRunningProcesses_v3,
                 "nvmlDeviceGetComputeRunningProcesses_v3", error))
      return fail(error);
    if (!nvml->check("nvmlInit_v2", functions->nvmlInit_v2(), error)) return fail(error);
    return nvml;
  }
  // nvmlShutdown is left to process exit, since a hung driver must not hang
  // the server's exit (and the library stays loaded in any case).
  ~NvmlLibrary() = default;

  bool sample(std::vector<DriverDeviceSample>& devices, std::string& error) {
    unsigned count = 0;
    if (!check("nvmlDeviceGetCount_v2", nvml_.nvmlDeviceGetCount_v2(&count), error)) return false;
    devices.clear();
    for (unsigned index = 0; index < count; ++index) {
      nvmlDevice_t device = nullptr;
      char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      if (!check("nvmlDeviceGetHandleByIndex_v2",
                 nvml_.nvmlDeviceGetHandleByIndex_v2(index, &device), error) ||
          !check("nvmlDeviceGetUUID", nvml_.nvmlDeviceGetUUID(device, uuid, sizeof uuid), error))
        return false;
      DriverDeviceSample sample;
      sample.uuid = uuid;
      // The list may grow between the count and the read: ask again.
      std::vector<nvmlProcessInfo_t> infos(16);
      for (;;) {
        auto size = static_cast<unsigned>(infos.size());
        const nvmlReturn_t result =
            nvml_.nvmlDeviceGetComputeRunningProcesses_v3(device, &size, infos.data());
        if (result == NVML_ERROR_INSUFFICIENT_SIZE) {
          infos.resize(size + 16);
          continue;
        }
        if (!check("nvmlDeviceGetComputeRunningProcesses_v3", result, error)) return false;
        infos.resize(size);
        break;
      }
      for (const nvmlProcessInfo_t& info : infos)
        sample.processes.push_back({static_cast<pid_t>(info.pid), info.usedGpuMemory});
      devices.push_back(std::move(sample));
    }
    return true;
  }

 private:
  explicit NvmlLibrary(const NvmlFunctions& nvml) : nvml_(nvml) {}

  template <typename Fn>
  static bool present(Fn fn, const char* name, std::string& error) {
    if (!fn) error = std::string(kNvmlLibraryName) + " has no " + name;
    return fn != nullptr;
  }

  bool check(const char* call, nvmlReturn_t result, std::string& error) {
    if (result == NVML_SUCCESS) return true;
    const char* text = nvml_.nvmlErrorString ? nvml_.nvmlErrorString(result) : nullptr;
    error = std::string(call) + " failed: " + (text ? text : "unknown error") + " (" +
            std::to_string(static_cast<int>(result)) + ")";
    return false;
  }

  const NvmlFunctions& nvml_;
};

Result<std::unique_ptr<DriverSampler>> DriverSampler::start(TimeNs interval_ns) {
  Result<std::unique_ptr<NvmlLibrary>> nvml = NvmlLibrary::load();
  if (!nvml) return fail(nvml.error());
  const int ready = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ready < 0) return fail(std::string("eventfd: ") + std::strerror(errno));
  return std::unique_ptr<DriverSampler>(new DriverSampler(std::move(*nvml), interval_ns, ready));
}

DriverSampler::DriverSampler(std::unique_ptr<NvmlLibrary> nvml, TimeNs interval_ns, int ready_fd)
    : nvml_(std::move(nvml)), interval_ns_(interval_ns), ready_fd_(ready_fd) {
  thread_ = std::thread([this] { run(); });
}

DriverSampler::~DriverSampler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  ::close(ready_fd_);
}

void DriverSampler::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    std::vector<DriverDeviceSample> sample;
    std::string error;
    const bool sampled = nvml_->sample(sample, error);
    lock.lock();
    if (sampled) {
      latest_ = std::move(sample);
      latest_error_.clear();
    } else {
      latest_.reset();
      latest_error_ = error;
    }
    fresh_ = true;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(ready_fd_, &one, sizeof one);
    wake_.wait_for(lock, std::chrono::nanoseconds(interval_ns_), [this] { return stopping_; });
  }
}

std::optional<std::vector<DriverDeviceSample>> DriverSampler::take(std::string& error) {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t got = ::read(ready_fd_, &count, sizeof count);
  std::lock_guard lock(mutex_);
  if (!fresh_) return std::nullopt;
  fresh_ = false;
  error = latest_error_;
  return std::exchange(latest_, std::nullopt);
}

}  // namespace gpulimit::server
