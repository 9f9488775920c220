// The processes holding memory or a context on a device, read from the shared
// state: host pids, memory as charged by the simulated libcuda. A process that
// died is gone from the list at the next query. Every process is a compute
// process: none draws graphics, and none runs under MPS.
#include "library.h"

namespace {

using fakecuda::ProcessUsage;

// No MIG on the simulated GPUs: NVML's documented value for "no instance".
constexpr unsigned int kNoMigInstance = 0xFFFFFFFFu;

void fill(nvmlProcessInfo_v1_t& info, const ProcessUsage& usage) {
  info = nvmlProcessInfo_v1_t{};
  info.pid = static_cast<unsigned int>(usage.pid);
  info.usedGpuMemory = usage.bytes;
}

void fill(nvmlProcessInfo_v2_t& info, const ProcessUsage& usage) {
  info = nvmlProcessInfo_v2_t{};
  info.pid = static_cast<unsigned int>(usage.pid);
  info.usedGpuMemory = usage.bytes;
  info.gpuInstanceId = kNoMigInstance;
  info.computeInstanceId = kNoMigInstance;
}

// One implementation for the three symbols, which differ only in the entry
// type. The list is read once, so the count returned and the entries written
// describe the same moment.
template <typename Info>
nvmlReturn_t list_processes(nvmlDevice_t device, unsigned int* count, Info* infos) {
  uint32_t index = 0;
  if (nvmlReturn_t r = fakecuda::nvml::index_of(device, index); r != NVML_SUCCESS) return r;
  // infos may be NULL only for a count query (*count == 0).
  if (!count || (*count > 0 && !infos)) return NVML_ERROR_INVALID_ARGUMENT;
  ProcessUsage found[fakecuda::kMaxProcesses];
  const size_t live =
      fakecuda::nvml::shared_state().processes(index, found, fakecuda::kMaxProcesses);
  const auto needed = static_cast<unsigned int>(live);
  if (needed > *count) {
    *count = needed;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < needed; ++i)
    fill(infos[i], found[i]);
  *count = needed;
  return NVML_SUCCESS;
}

// The lists that are always empty, with the same argument checks.
template <typename Info>
nvmlReturn_t no_processes(nvmlDevice_t device, unsigned int* count, Info* infos) {
  uint32_t index = 0;
  if (nvmlReturn_t r = fakecuda::nvml::index_of(device, index); r != NVML_SUCCESS) return r;
  if (!count || (*count > 0 && !infos)) return NVML_ERROR_INVALID_ARGUMENT;
  *count = 0;
  return NVML_SUCCESS;
}

}  // namespace

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_v1_t* infos) {
  return list_processes(device, infoCount, infos);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_v2_t* infos) {
  return list_processes(device, infoCount, infos);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_t* infos) {
  return list_processes(device, infoCount, infos);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_v1_t* infos) {
  return no_processes(device, infoCount, infos);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_v2_t* infos) {
  return no_processes(device, infoCount, infos);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_t* infos) {
  return no_processes(device, infoCount, infos);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_v1_t* infos) {
  return no_processes(device, infoCount, infos);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_v2_t* infos) {
  return no_processes(device, infoCount, infos);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(
    nvmlDevice_t device, unsigned int* infoCount, nvmlProcessInfo_t* infos) {
  return no_processes(device, infoCount, infos);
}
