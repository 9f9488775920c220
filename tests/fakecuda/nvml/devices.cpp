// Device enumeration and identity. NVML enumerates every physical device in
// index order and ignores CUDA_VISIBLE_DEVICES, like the real library: a
// CUDA ordinal and an NVML index name the same GPU only when no mask is set,
// which is why tools match the two by UUID or PCI bus id.
#include <cstdio>

#include "device_limits.h"
#include "library.h"

namespace {

using fakecuda::format_uuid;
using fakecuda::nvml::copy_string;
using fakecuda::nvml::handle_of;
using fakecuda::nvml::index_of;
using fakecuda::nvml::initialised;
using fakecuda::nvml::machine;

// Where the simulated GPUs sit on the PCI bus: domain 0, bus 0x10 + index,
// device 0, function 0 (device_limits.h, shared with libcuda's PCI
// attributes, so that a tool matching CUDA devices to NVML devices by bus id
// finds the right one). NVML prints this as "00000000:%02X:00.0" (busId) and
// "0000:%02X:00.0" (busIdLegacy, the 13-byte form cuDeviceGetPCIBusId
// returns). The device id is a GH100's: the default machine is a Hopper part.
constexpr unsigned int kFirstPciBus = fakecuda::kFirstPciBus;
constexpr unsigned int kPciDeviceId = fakecuda::kPciDeviceVendorId;

nvmlReturn_t device_count(unsigned int* count) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = machine().device_count;
  return NVML_SUCCESS;
}

nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t* device) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= machine().device_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = handle_of(index);
  return NVML_SUCCESS;
}

}  // namespace

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) {
  return device_count(deviceCount);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  return device_count(deviceCount);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index,
                                                             nvmlDevice_t* device) {
  return handle_by_index(index, device);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                                nvmlDevice_t* device) {
  return handle_by_index(index, device);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid,
                                                            nvmlDevice_t* device) {
  if (!initialised()) return NVML_ERROR_UNINITIALIZED;
  if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
  const fakecuda::MachineConfig& m = machine();
  for (uint32_t i = 0; i < m.device_count; ++i) {
    if (format_uuid(m.devices[i].uuid) == uuid) {
      *device = handle_of(i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  uint32_t found = 0;
  if (nvmlReturn_t r = index_of(device, found); r != NVML_SUCCESS) return r;
  if (!index) return NVML_ERROR_INVALID_ARGUMENT;
  *index = found;
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                                    unsigned int length) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  return copy_string(machine().devices[index].name, name, length);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                                    unsigned int length) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  return copy_string(format_uuid(machine().devices[index].uuid), uuid, length);
}

// The minor number of /dev/nvidiaN: the physical index on a plain machine.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device,
                                                           unsigned int* minorNumber) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!minorNumber) return NVML_ERROR_INVALID_ARGUMENT;
  *minorNumber = index;
  return NVML_SUCCESS;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = nvmlPciInfo_t{};
  pci->domain = 0;
  pci->bus = kFirstPciBus + index;
  pci->device = 0;
  pci->pciDeviceId = kPciDeviceId;
  pci->pciSubSystemId = 0;
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT,
                pci->domain, pci->bus, pci->device);
  std::snprintf(pci->busId, sizeof(pci->busId), NVML_DEVICE_PCI_BUS_ID_FMT, pci->domain, pci->bus,
                pci->device);
  return NVML_SUCCESS;
}
