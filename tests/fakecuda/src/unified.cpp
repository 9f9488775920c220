// Unified memory hints: cuMemAdvise, cuMemPrefetchAsync and what
// cuMemRangeGetAttribute(s) report of them. Managed memory never migrates on
// the simulator (it is host address space, charged to its device at
// allocation), so the hints only change what the range attributes say. They
// are kept per allocation, not per page.
#include "context.h"
#include "stream.h"

using namespace fakecuda;

namespace {

// The managed allocation holding all of [ptr, ptr + count) (caller holds
// Driver::mu); system memory is refused, as without
// CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS.
Allocation* managed_range_locked(CUdeviceptr ptr, size_t count) {
  if (count == 0) return nullptr;
  Allocation* a = find_allocation(ptr);
  if (!a || a->kind != AllocationKind::kManaged) return nullptr;
  return ptr + count <= a->base + a->size ? a : nullptr;
}

// A location as the real driver accepts it for advice and prefetches: a
// device, the host, or the host's NUMA node (one node, 0, here).
CUresult checked_location(CUmemLocation in, CUmemLocation* out) {
  switch (in.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      FAKECUDA_REQUIRE(Driver::get().valid_device(in.id), CUDA_ERROR_INVALID_DEVICE);
      *out = in;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
      *out = CUmemLocation{CU_MEM_LOCATION_TYPE_HOST, 0};
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      FAKECUDA_REQUIRE(in.id == 0, CUDA_ERROR_INVALID_VALUE);
      *out = in;
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      *out = CUmemLocation{CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The CUDA 8 form: a device ordinal or CU_DEVICE_CPU.
CUmemLocation location_of_device(CUdevice device) {
  if (device == CU_DEVICE_CPU) return CUmemLocation{CU_MEM_LOCATION_TYPE_HOST, 0};
  return CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, device};
}
int device_of_location(const CUmemLocation& l) {
  switch (l.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return l.id;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      return CU_DEVICE_CPU;
    default:
      return CU_DEVICE_INVALID;
  }
}

CUresult prefetch(CUdeviceptr ptr, size_t count, CUmemLocation location, unsigned flags,
                  CUstream stream, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(flags == 0, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  Allocation* a = managed_range_locked(ptr, count);
  FAKECUDA_REQUIRE(a, CUDA_ERROR_INVALID_VALUE);
  CUmemLocation where{};
  if (CUresult r = checked_location(location, &where); r != CUDA_SUCCESS) return r;
  // Nothing moves; the prefetch still takes its place in the stream.
  if (CUresult r = submit_locked(stream, mode, action_op([](uint64_t) {})); r != CUDA_SUCCESS)
    return r;
  a->last_prefetch = where;  // what the application asked for, done or not
  return CUDA_SUCCESS;
}

CUresult advise(CUdeviceptr ptr, size_t count, CUmem_advise advice, CUmemLocation location) {
  FAKECUDA_REQUIRE_INIT();
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  Allocation* a = managed_range_locked(ptr, count);
  FAKECUDA_REQUIRE(a, CUDA_ERROR_INVALID_VALUE);
  CUmemLocation where{};
  switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
      a->read_mostly = true;
      return CUDA_SUCCESS;
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
      a->read_mostly = false;
      return CUDA_SUCCESS;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
      if (CUresult r = checked_location(location, &where); r != CUDA_SUCCESS) return r;
      a->preferred = where;
      return CUDA_SUCCESS;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      a->preferred = CUmemLocation{};
      return CUDA_SUCCESS;
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY: {
      if (CUresult r = checked_location(location, &where); r != CUDA_SUCCESS) return r;
      // Only devices are recorded: the host always reaches managed memory.
      if (where.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_SUCCESS;
      const uint32_t bit = 1u << where.id;
      a->accessed_by =
          advice == CU_MEM_ADVISE_SET_ACCESSED_BY ? a->accessed_by | bit : a->accessed_by & ~bit;
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

void put_int(void* data, int value) {
  *static_cast<int*>(data) = value;
}

CUresult range_attribute_locked(const Allocation& a, void* data, size_t size,
                                CUmem_range_attribute attribute) {
  FAKECUDA_REQUIRE(data, CUDA_ERROR_INVALID_VALUE);
  if (attribute == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY) {
    FAKECUDA_REQUIRE(size > 0 && size % 4 == 0, CUDA_ERROR_INVALID_VALUE);
    int* out = static_cast<int*>(data);
    size_t n = 0;
    for (int dev = 0; dev < Driver::get().device_count() && n < size / 4; ++dev)
      if (a.accessed_by & (1u << dev)) out[n++] = dev;
    for (; n < size / 4; ++n)
      out[n] = CU_DEVICE_INVALID;
    return CUDA_SUCCESS;
  }
  FAKECUDA_REQUIRE(size == 4, CUDA_ERROR_INVALID_VALUE);
  switch (attribute) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
      put_int(data, a.read_mostly);
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      put_int(data, device_of_location(a.preferred));
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
      put_int(data, device_of_location(a.last_prefetch));
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
      put_int(data, a.preferred.type);
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
      put_int(data, a.preferred.id);
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
      put_int(data, a.last_prefetch.type);
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
      put_int(data, a.last_prefetch.id);
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

FAKECUDA_EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr ptr, size_t count, CUdevice dstDevice,
                                            CUstream s) {
  return prefetch(ptr, count, location_of_device(dstDevice), 0, s, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr ptr, size_t count, CUdevice dstDevice,
                                                 CUstream s) {
  return prefetch(ptr, count, location_of_device(dstDevice), 0, s, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr ptr, size_t count,
                                               CUmemLocation location, unsigned int flags,
                                               CUstream s) {
  return prefetch(ptr, count, location, flags, s, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr ptr, size_t count,
                                                    CUmemLocation location, unsigned int flags,
                                                    CUstream s) {
  return prefetch(ptr, count, location, flags, s, DefaultStream::kPerThread);
}

FAKECUDA_EXPORT CUresult cuMemAdvise(CUdeviceptr ptr, size_t count, CUmem_advise advice,
                                     CUdevice device) {
  return advise(ptr, count, advice, location_of_device(device));
}
FAKECUDA_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr ptr, size_t count, CUmem_advise advice,
                                        CUmemLocation location) {
  return advise(ptr, count, advice, location);
}

FAKECUDA_EXPORT CUresult cuMemRangeGetAttribute(void* data, size_t dataSize,
                                                CUmem_range_attribute attribute, CUdeviceptr devPtr,
                                                size_t count) {
  FAKECUDA_REQUIRE_INIT();
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  const Allocation* a = managed_range_locked(devPtr, count);
  FAKECUDA_REQUIRE(a, CUDA_ERROR_INVALID_VALUE);
  return range_attribute_locked(*a, data, dataSize, attribute);
}

FAKECUDA_EXPORT CUresult cuMemRangeGetAttributes(void** data, size_t* dataSizes,
                                                 CUmem_range_attribute* attributes,
                                                 size_t numAttributes, CUdeviceptr devPtr,
                                                 size_t count) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(data && dataSizes && attributes && numAttributes > 0, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  const Allocation* a = managed_range_locked(devPtr, count);
  FAKECUDA_REQUIRE(a, CUDA_ERROR_INVALID_VALUE);
  for (size_t i = 0; i < numAttributes; ++i)
    if (CUresult r = range_attribute_locked(*a, data[i], dataSizes[i], attributes[i]);
        r != CUDA_SUCCESS)
      return r;
  return CUDA_SUCCESS;
}
