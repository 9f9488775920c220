// How devices connect: no NVLink (the simulated devices are PCIe peers under
// one host bridge), so the NVLink and NVLink-fabric queries are refused as on
// a board without links, and peer-to-peer goes over PCIe, as libcuda's
// cuDeviceCanAccessPeer says.
#include "library.h"

namespace {

using fakecuda::nvml::index_of;

nvmlReturn_t no_nvlink(nvmlDevice_t device, unsigned int link, const void* out) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!out || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_ERROR_NOT_SUPPORTED;
}

}  // namespace

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                           nvmlEnableState_t* isActive) {
  return no_nvlink(device, link, isActive);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(
    nvmlDevice_t device, unsigned int link, nvmlIntNvLinkDeviceType_t* pNvLinkDeviceType) {
  return no_nvlink(device, link, pNvLinkDeviceType);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                                      unsigned int link,
                                                                      nvmlPciInfo_t* pci) {
  return no_nvlink(device, link, pci);
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                                         nvmlGpuP2PCapsIndex_t p2pIndex,
                                                         nvmlGpuP2PStatus_t* p2pStatus) {
  uint32_t first = 0, second = 0;
  if (nvmlReturn_t r = index_of(device1, first); r != NVML_SUCCESS) return r;
  if (nvmlReturn_t r = index_of(device2, second); r != NVML_SUCCESS) return r;
  if (!p2pStatus) return NVML_ERROR_INVALID_ARGUMENT;
  switch (p2pIndex) {
    case NVML_P2P_CAPS_INDEX_READ:
    case NVML_P2P_CAPS_INDEX_WRITE:
    case NVML_P2P_CAPS_INDEX_ATOMICS:
    case NVML_P2P_CAPS_INDEX_PCI:
      // A device is not its own peer (chosen: as cuDeviceCanAccessPeer says).
      *p2pStatus = first != second ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
      return NVML_SUCCESS;
    case NVML_P2P_CAPS_INDEX_NVLINK:
      *p2pStatus = NVML_P2P_STATUS_NOT_SUPPORTED;
      return NVML_SUCCESS;
    case NVML_P2P_CAPS_INDEX_UNKNOWN:
      break;
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(
    nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuTopologyLevel_t* pathInfo) {
  uint32_t first = 0, second = 0;
  if (nvmlReturn_t r = index_of(device1, first); r != NVML_SUCCESS) return r;
  if (nvmlReturn_t r = index_of(device2, second); r != NVML_SUCCESS) return r;
  if (!pathInfo) return NVML_ERROR_INVALID_ARGUMENT;
  *pathInfo = first == second ? NVML_TOPOLOGY_INTERNAL : NVML_TOPOLOGY_HOSTBRIDGE;
  return NVML_SUCCESS;
}

// PyTorch asks before using multi-node NVLink; without a fabric the answer
// is NVML_ERROR_NOT_SUPPORTED, as on a PCIe board.
FAKECUDA_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device,
                                                              nvmlGpuFabricInfoV_t* gpuFabricInfo) {
  uint32_t index = 0;
  if (nvmlReturn_t r = index_of(device, index); r != NVML_SUCCESS) return r;
  if (!gpuFabricInfo) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_ERROR_NOT_SUPPORTED;
}
