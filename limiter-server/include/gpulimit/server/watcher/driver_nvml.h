// Per-process GPU memory from the driver (NVML, loaded with dlopen: the
// server never links the driver), read on a thread of its own so that a
// slow or hung driver never stalls the event loop: the loop is told through
// an eventfd when a new sample is ready and takes it without waiting.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/server/result.h"
#include "gpulimit/server/scheduling/scheduling_types.h"
#include "gpulimit/server/watcher/driver_cross_check.h"

namespace gpulimit::server {

class NvmlLibrary;

class DriverSampler {
 public:
  // Loads libnvidia-ml.so.1 and initialises it, or says why not; then
  // samples every `interval_ns`, the first time at once.
  static Result<std::unique_ptr<DriverSampler>> start(TimeNs interval_ns);
  // Stops the thread (waits for a sample in progress to end).
  ~DriverSampler();
  DriverSampler(const DriverSampler&) = delete;
  DriverSampler& operator=(const DriverSampler&) = delete;

  // Readable when a sample (or a failure) is ready.
  int fd() const { return ready_fd_; }
  // The latest sample, once; nullopt when none is new. A failed sample
  // comes as its one-line error in `error`.
  std::optional<std::vector<DriverDeviceSample>> take(std::string& error);

 private:
  DriverSampler(std::unique_ptr<NvmlLibrary> nvml, TimeNs interval_ns, int ready_fd);
  void run();

  std::unique_ptr<NvmlLibrary> nvml_;
  TimeNs interval_ns_;
  int ready_fd_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<std::vector<DriverDeviceSample>> latest_;
  std::string latest_error_;
  bool fresh_ = false;
  std::thread thread_;
};

}  // namespace gpulimit::server
