// The simulated libnvidia-ml.so.1: initialisation and the system-wide
// queries. Device queries live in devices.cpp, memory_info.cpp and
// running_processes.cpp; all of them read the machine from library.h.
//
// Entry points never call other entry points: an interposer preloaded in
// front of this library would otherwise see one application call twice.
#include <cstdio>

#include "library.h"

namespace {

using fakecuda::nvml::initialised;
using fakecuda::nvml::machine;

// The driver branch that first shipped each CUDA version (Linux), so that a
// tool comparing the two sees a consistent pair. Ascending.
struct DriverBranch {
  uint32_t cuda_version;
  uint32_t branch;
};
constexpr DriverBranch kDriverBranches[] = {
    {11080, 520}, {12000, 525}, {12010, 530}, {12020, 535}, {12030, 545}, {12040, 550},
    {12050, 555}, {12060, 560}, {12080, 570}, {12090, 575}, {13000, 580},
};

uint32_t driver_branch(uint32_t cuda_version) {
  uint32_t branch = kDriverBranches[0].branch;
  for (const DriverBranch& row : kDriverBranches)
    if (row.cuda_version <= cuda_version) branch = row.branch;
  return branch;
}

nvmlReturn_t cuda_driver_version(int* version) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  *version = static_cast<int>(machine().driver_version);
  return NVML_SUCCESS;
}

}  // namespace

// nvmlInit (the v1 ABI) attached every GPU at once; with nothing to attach
// here it is the same as nvmlInit_v2.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlInit(void) {
  return fakecuda::nvml::init(0);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  return fakecuda::nvml::init(0);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  return fakecuda::nvml::init(flags);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
  return fakecuda::nvml::shutdown();
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
  std::snprintf(text, sizeof(text), "%u.00", driver_branch(machine().driver_version));
  return fakecuda::nvml::copy_string(text, version, length);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  return cuda_driver_version(cudaDriverVersion);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  return cuda_driver_version(cudaDriverVersion);
}

// NVML's own version: the CUDA major version, then the driver's.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  char text[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
  std::snprintf(text, sizeof(text), "%u.%u.00", machine().driver_version / 1000,
                driver_branch(machine().driver_version));
  return fakecuda::nvml::copy_string(text, version, length);
}
