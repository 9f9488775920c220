// How busy a device is: the fraction of NVML's one-second sample period in
// which a kernel of any process ran, from the device timeline every process
// shares (SharedState), and the same per process. Memory traffic is not
// simulated (copies take no device time), so memory utilization is 0.
#include <time.h>

#include <algorithm>

#include "library.h"

namespace {

using fakecuda::ProcessBusy;

// NVML stamps samples with the CPU's wall clock in microseconds; the
// timeline runs on CLOCK_MONOTONIC.
unsigned long long wall_clock_us(uint64_t monotonic_ns, uint64_t monotonic_now) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  const uint64_t wall_now =
      static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
  const uint64_t age = monotonic_now > monotonic_ns ? monotonic_now - monotonic_ns : 0;
  return (wall_now - age) / 1000;
}

// The video engines are never used: nothing encodes or decodes.
nvmlReturn_t video_engine(nvmlDevice_t device, unsigned int* utilization,
                          unsigned int* samplingPeriodUs) {
  uint32_t index = 0;
  if (nvmlReturn_t r = fakecuda::nvml::index_of(device, index); r != NVML_SUCCESS) return r;
  if (!utilization || !samplingPeriodUs) return NVML_ERROR_INVALID_ARGUMENT;
  *utilization = 0;
  *samplingPeriodUs = static_cast<unsigned int>(fakecuda::kUtilizationWindowNs / 1000);
  return NVML_SUCCESS;
}

}  // namespace

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                                nvmlUtilization_t* utilization) {
  uint32_t index = 0;
  if (nvmlReturn_t r = fakecuda::nvml::index_of(device, index); r != NVML_SUCCESS) return r;
  if (!utilization) return NVML_ERROR_INVALID_ARGUMENT;
  utilization->gpu = fakecuda::nvml::shared_state().utilization(index, fakecuda::now_ns());
  utilization->memory = 0;
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device,
                                                                  unsigned int* utilization,
                                                                  unsigned int* samplingPeriodUs) {
  return video_engine(device, utilization, samplingPeriodUs);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device,
                                                                  unsigned int* utilization,
                                                                  unsigned int* samplingPeriodUs) {
  return video_engine(device, utilization, samplingPeriodUs);
}

// One sample per live process that ran a kernel in the last sample period,
// stamped with the end of its latest kernel (no later than now); only those
// newer than lastSeenTimeStamp (microseconds, wall clock) are returned.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
    unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp) {
  uint32_t index = 0;
  if (nvmlReturn_t r = fakecuda::nvml::index_of(device, index); r != NVML_SUCCESS) return r;
  if (!processSamplesCount) return NVML_ERROR_INVALID_ARGUMENT;
  const uint64_t now = fakecuda::now_ns();
  ProcessBusy busy[fakecuda::kMaxProcesses];
  const size_t live =
      fakecuda::nvml::shared_state().process_utilization(index, now, busy, fakecuda::kMaxProcesses);
  nvmlProcessUtilizationSample_t samples[fakecuda::kMaxProcesses];
  unsigned int found = 0;
  for (size_t i = 0; i < live && i < fakecuda::kMaxProcesses; ++i) {
    const unsigned long long stamp = wall_clock_us(std::min(busy[i].last_active_ns, now), now);
    if (stamp <= lastSeenTimeStamp) continue;
    samples[found++] = nvmlProcessUtilizationSample_t{
        static_cast<unsigned int>(busy[i].pid), stamp, busy[i].percent, 0, 0, 0};
  }
  // A NULL buffer asks for the number of samples.
  if (!utilization || *processSamplesCount < found) {
    *processSamplesCount = found;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (found == 0) {
    *processSamplesCount = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  for (unsigned int i = 0; i < found; ++i)
    utilization[i] = samples[i];
  *processSamplesCount = found;
  return NVML_SUCCESS;
}
