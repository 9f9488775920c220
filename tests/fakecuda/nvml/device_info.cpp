// What a device is and how it is set up: brand, architecture, serial,
// modes, BAR1, PCIe link, and finding a device by its PCI bus id. The
// answers are an H100 SXM's where the simulated machine does not say.
#include <cstdio>
#include <string>

#include "device_limits.h"
#include "library.h"

namespace {

using fakecuda::nvml::handle_of;
using fakecuda::nvml::index_of;
using fakecuda::nvml::initialised;
using fakecuda::nvml::machine;

// An SXM5 board sits on a PCIe Gen5 x16 link, running at full speed.
constexpr unsigned int kPcieGeneration = 5;
constexpr unsigned int kPcieWidth = 16;
// BAR1 is 128 GiB on H100 boards; the simulator maps none of it.
constexpr unsigned long long kBar1Bytes = 128ull << 30;

// The architecture NVML names for a compute capability.
nvmlDeviceArchitecture_t architecture(uint32_t major, uint32_t minor) {
  switch (major) {
    case 3:
      return NVML_DEVICE_ARCH_KEPLER;
    case 5:
      return NVML_DEVICE_ARCH_MAXWELL;
    case 6:
      return NVML_DEVICE_ARCH_PASCAL;
    case 7:
      return minor >= 5 ? NVML_DEVICE_ARCH_TURING : NVML_DEVICE_ARCH_VOLTA;
    case 8:
      return minor == 9 ? NVML_DEVICE_ARCH_ADA : NVML_DEVICE_ARCH_AMPERE;
    case 9:
      return NVML_DEVICE_ARCH_HOPPER;
    case 10:
    case 12:
      return NVML_DEVICE_ARCH_BLACKWELL;
    default:
      return NVML_DEVICE_ARCH_UNKNOWN;
  }
}

// A query that only needs a valid handle and a non-NULL output.
template <typename T>
nvmlReturn_t answer(nvmlDevice_t device, T* out, T value) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  *out = value;
  return NVML_SUCCESS;
}

nvmlReturn_t handle_by_pci_bus_id(const char* bus_id, nvmlDevice_t* device) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (!bus_id || !device) return NVML_ERROR_INVALID_ARGUMENT;
  // domain:bus:device.function in hex, the domain in 4 or 8 digits, or
  // bus:device.function in domain 0.
  unsigned domain = 0, bus = 0, dev = 0, function = 0;
  char tail = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x%c", &domain, &bus, &dev, &function, &tail) != 4) {
    domain = 0;
    if (std::sscanf(bus_id, "%x:%x.%x%c", &bus, &dev, &function, &tail) != 3)
      return NVML_ERROR_INVALID_ARGUMENT;
  }
  for (uint32_t i = 0; i < machine().device_count; ++i) {
    if (domain == 0 && bus == fakecuda::kFirstPciBus + i && dev == 0 && function == 0) {
      *device = handle_of(i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

}  // namespace

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* pciBusId,
                                                                nvmlDevice_t* device) {
  return handle_by_pci_bus_id(pciBusId, device);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId,
                                                                   nvmlDevice_t* device) {
  return handle_by_pci_bus_id(pciBusId, device);
}

// Data-center Hopper boards report the plain "NVIDIA" brand.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t* type) {
  return answer(device, type, NVML_BRAND_NVIDIA);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
                                                            nvmlDeviceArchitecture_t* arch) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!arch) return NVML_ERROR_INVALID_ARGUMENT;
  const fakecuda::DeviceConfig& d = machine().devices[index];
  *arch = architecture(d.cc_major, d.cc_minor);
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device,
                                                                     int* major, int* minor) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  *major = static_cast<int>(machine().devices[index].cc_major);
  *minor = static_cast<int>(machine().devices[index].cc_minor);
  return NVML_SUCCESS;
}

// Board serials are 13 decimal digits; these end in the index.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial,
                                                      unsigned int length) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  char text[NVML_DEVICE_SERIAL_BUFFER_SIZE];
  std::snprintf(text, sizeof(text), "16500230%05u", index);
  return fakecuda::nvml::copy_string(text, serial, length);
}

// Data-center machines run nvidia-persistenced.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                                               nvmlEnableState_t* mode) {
  return answer(device, mode, NVML_FEATURE_ENABLED);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device,
                                                           nvmlComputeMode_t* mode) {
  return answer(device, mode, NVML_COMPUTEMODE_DEFAULT);
}

// Hopper can be partitioned; the simulated devices never are.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device,
                                                       unsigned int* currentMode,
                                                       unsigned int* pendingMode) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!currentMode || !pendingMode) return NVML_ERROR_INVALID_ARGUMENT;
  *currentMode = NVML_DEVICE_MIG_DISABLE;
  *pendingMode = NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

// ECC is on, as libcuda's CU_DEVICE_ATTRIBUTE_ECC_ENABLED says.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device,
                                                       nvmlEnableState_t* current,
                                                       nvmlEnableState_t* pending) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  *current = NVML_FEATURE_ENABLED;
  *pending = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

// A persistent data-center GPU stays in P0.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device,
                                                                nvmlPstates_t* pState) {
  return answer(device, pState, NVML_PSTATE_0);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device,
                                                              nvmlBAR1Memory_t* bar1Memory) {
  return answer(device, bar1Memory, nvmlBAR1Memory_t{kBar1Bytes, kBar1Bytes, 0});
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t device,
                                                              unsigned int* busWidth) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!busWidth) return NVML_ERROR_INVALID_ARGUMENT;
  *busWidth = machine().devices[index].bus_width_bits;
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device,
                                                                     unsigned int* maxLinkGen) {
  return answer(device, maxLinkGen, kPcieGeneration);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device,
                                                                unsigned int* maxLinkWidth) {
  return answer(device, maxLinkWidth, kPcieWidth);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device,
                                                                      unsigned int* currLinkGen) {
  return answer(device, currLinkGen, kPcieGeneration);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device,
                                                                 unsigned int* currLinkWidth) {
  return answer(device, currLinkWidth, kPcieWidth);
}

// Data-center boards drive no display.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device,
                                                           nvmlEnableState_t* display) {
  return answer(device, display, NVML_FEATURE_DISABLED);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device,
                                                             nvmlEnableState_t* isActive) {
  return answer(device, isActive, NVML_FEATURE_DISABLED);
}
