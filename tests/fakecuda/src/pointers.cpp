// Pointer attributes (cuPointerGetAttribute(s), cuPointerSetAttribute) of
// every kind of memory the simulator hands out: linear, managed, pool,
// graph, VMM-mapped, IPC-opened and page-locked host memory.
//
// cuPointerGetAttribute refuses a pointer the driver does not know
// (CUDA_ERROR_INVALID_VALUE); cuPointerGetAttributes answers it with default
// values and success, which the runtime turns into "unregistered" memory.
#include <cstring>

#include "context.h"
#include "memory.h"

using namespace fakecuda;

namespace {

// What a pointer is, as far as the attributes go. `a` null and `vmm.reservation`
// 0: unknown; `a` null with a reservation: reserved VMM address space that is
// not mapped.
struct Target {
  uintptr_t ptr = 0;
  Allocation* a = nullptr;
  VmmInfo vmm;
  bool in_vmm = false;
};

Target find_target_locked(uintptr_t ptr) {
  Target t;
  t.ptr = ptr;
  t.a = find_allocation(ptr);
  t.in_vmm = vmm_lookup_locked(ptr, &t.vmm);
  return t;
}

template <typename T>
void put(void* data, T value) {
  std::memcpy(data, &value, sizeof value);
}

uint64_t next_buffer_id() {
  static uint64_t next = 0;  // under Driver::mu
  return ++next;
}

// Bytes written for `attribute`; 0 for attributes the driver does not know.
size_t attribute_size(CUpointer_attribute attribute) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      return 4;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      return 8;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
      return sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS);
    default:
      return 0;
  }
}

// The answer for a known pointer; CUDA_ERROR_INVALID_VALUE where the real
// driver has none (caller holds Driver::mu).
CUresult attribute_of(const Target& t, CUpointer_attribute attribute, void* data) {
  // Reserved VMM address space without a mapping has only its range.
  if (!t.a) {
    if (!t.in_vmm) return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        put<CUdeviceptr>(data, t.vmm.reservation);
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        put<size_t>(data, t.vmm.reservation_size);
        return CUDA_SUCCESS;
      case CU_POINTER_ATTRIBUTE_MAPPED:
        put<int>(data, 0);
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  Allocation& a = *t.a;
  const bool host = a.kind == AllocationKind::kHost;
  const bool mapped_vmm = a.kind == AllocationKind::kMapped && t.in_vmm;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      put<CUcontext>(data, a.ctx);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      put<unsigned>(data, host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      // The address through which kernels of the current context reach it.
      if (!current_context()) return CUDA_ERROR_INVALID_CONTEXT;
      put<CUdeviceptr>(data, t.ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!host && a.kind != AllocationKind::kManaged) return CUDA_ERROR_INVALID_VALUE;
      put<void*>(data, reinterpret_cast<void*>(t.ptr));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS: {
      if (a.kind != AllocationKind::kLinear) return CUDA_ERROR_INVALID_VALUE;
      if (!a.buffer_id) a.buffer_id = next_buffer_id();
      CUDA_POINTER_ATTRIBUTE_P2P_TOKENS tokens{a.buffer_id, static_cast<unsigned>(a.physical)};
      put(data, tokens);
      a.sync_memops = true;  // documented side effect
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      put<int>(data, a.sync_memops);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      if (!a.buffer_id) a.buffer_id = next_buffer_id();
      put<unsigned long long>(data, a.buffer_id);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      put<int>(data, a.kind == AllocationKind::kManaged);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      put<int>(data, a.ordinal);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      put<int>(data, a.kind == AllocationKind::kLinear && a.mapped > 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      put<CUdeviceptr>(data, mapped_vmm ? t.vmm.reservation : a.base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      put<size_t>(data, mapped_vmm ? t.vmm.reservation_size : a.size);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      put<int>(data, 1);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      put<unsigned long long>(data,
                              mapped_vmm ? t.vmm.handle_types : uint64_t{CU_MEM_HANDLE_TYPE_NONE});
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED is 0 on the simulator.
      put<int>(data, 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      put<unsigned>(data, mapped_vmm ? t.vmm.access
                                     : static_cast<unsigned>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      put<CUmemoryPool>(data, a.kind == AllocationKind::kPool ? a.pool : nullptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      put<size_t>(data, mapped_vmm ? t.vmm.mapping_size : a.size);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      put<CUdeviceptr>(data, mapped_vmm ? t.vmm.mapping : a.base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      if (mapped_vmm) {
        put<unsigned long long>(data, t.vmm.block_id);
      } else {
        if (!a.buffer_id) a.buffer_id = next_buffer_id();
        put<unsigned long long>(data, a.buffer_id);
      }
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      put<int>(data, 0);
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

FAKECUDA_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                               CUdeviceptr ptr) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(data, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  return attribute_of(find_target_locked(ptr), attribute, data);
}

FAKECUDA_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes,
                                                CUpointer_attribute* attributes, void** data,
                                                CUdeviceptr ptr) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(numAttributes > 0 && attributes && data, CUDA_ERROR_INVALID_VALUE);
  for (unsigned i = 0; i < numAttributes; ++i) {
    // P2P tokens are not among the attributes this form answers.
    FAKECUDA_REQUIRE(
        attribute_size(attributes[i]) && attributes[i] != CU_POINTER_ATTRIBUTE_P2P_TOKENS,
        CUDA_ERROR_INVALID_VALUE);
    FAKECUDA_REQUIRE(data[i], CUDA_ERROR_INVALID_VALUE);
  }
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  const Target t = find_target_locked(ptr);
  for (unsigned i = 0; i < numAttributes; ++i) {
    if (attribute_of(t, attributes[i], data[i]) == CUDA_SUCCESS) continue;
    // No answer (an unknown pointer, a device pointer's host address):
    // the default, NULL or 0, and the device ordinal of no device.
    std::memset(data[i], 0, attribute_size(attributes[i]));
    if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) put<int>(data[i], -2);
  }
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuPointerSetAttribute(const void* value, CUpointer_attribute attribute,
                                               CUdeviceptr ptr) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(value, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(attribute == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  Allocation* a = find_allocation(ptr);
  FAKECUDA_REQUIRE(a, CUDA_ERROR_INVALID_VALUE);
  unsigned on = 0;
  std::memcpy(&on, value, sizeof on);
  // Synchronous copies here always complete before they return, so there is
  // nothing pending to wait for.
  a->sync_memops = on != 0;
  return CUDA_SUCCESS;
}
