// What the links between devices, and between a device and the host, can
// do: the simulated devices are PCIe peers (cuDeviceCanAccessPeer) without
// native atomics over PCIe, and the host link has none either
// (CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED is 0).
#include "driver.h"

using namespace fakecuda;

namespace {

// The checks the two atomic capability queries share, then zeros: no
// operation is native over the link.
CUresult no_native_atomics(unsigned int* capabilities, const CUatomicOperation* operations,
                           unsigned int count) {
  FAKECUDA_REQUIRE(capabilities && operations && count > 0, CUDA_ERROR_INVALID_VALUE);
  for (unsigned int i = 0; i < count; ++i) {
    const int operation = static_cast<int>(operations[i]);
    FAKECUDA_REQUIRE(operation >= 0 && operation < CU_ATOMIC_OPERATION_MAX,
                     CUDA_ERROR_INVALID_VALUE);
  }
  for (unsigned int i = 0; i < count; ++i)
    capabilities[i] = 0;
  return CUDA_SUCCESS;
}

CUresult checked_pair(CUdevice src, CUdevice dst) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(src) && d.valid_device(dst) && src != dst,
                   CUDA_ERROR_INVALID_DEVICE);
  return CUDA_SUCCESS;
}

}  // namespace

FAKECUDA_EXPORT CUresult cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attrib,
                                                 CUdevice srcDevice, CUdevice dstDevice) {
  if (CUresult r = checked_pair(srcDevice, dstDevice); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(value, CUDA_ERROR_INVALID_VALUE);
  switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
      *value = 0;  // one kind of link (PCIe) between every pair
      return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
      *value = 1;
      return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:  // chosen: arrays stay local
      *value = 0;
      return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

FAKECUDA_EXPORT CUresult cuDeviceGetP2PAtomicCapabilities(unsigned int* capabilities,
                                                          const CUatomicOperation* operations,
                                                          unsigned int count, CUdevice srcDevice,
                                                          CUdevice dstDevice) {
  if (CUresult r = checked_pair(srcDevice, dstDevice); r != CUDA_SUCCESS) return r;
  return no_native_atomics(capabilities, operations, count);
}

FAKECUDA_EXPORT CUresult cuDeviceGetHostAtomicCapabilities(unsigned int* capabilities,
                                                           const CUatomicOperation* operations,
                                                           unsigned int count, CUdevice dev) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(Driver::get().valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  return no_native_atomics(capabilities, operations, count);
}
