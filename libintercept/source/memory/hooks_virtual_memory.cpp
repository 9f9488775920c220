// Virtual memory management: the physical allocation (cuMemCreate) is what
// takes device memory, on the device its properties name (the calling thread
// may have no context: NCCL's proxy threads), and cuMemRelease gives it back.
// Reserving and mapping address space take no memory and are not hooked.
#include "memory/accounting.h"

using namespace gpulimit;

GPULIMIT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  auto real = real_function(real::cuMemCreate);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tenant || !handle || !prop || size == 0 ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return real(handle, size, prop, flags);
  return charged<true>(
      tenant, tenant->ledger_device(prop->location.id), size,
      [&](uint64_t* key) {
        CUresult r = real(handle, size, prop, flags);
        *key = *handle;
        return r;
      },
      [](uint64_t key) { real_function(real::cuMemRelease)(key); });
}

GPULIMIT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  auto real = real_function(real::cuMemRelease);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return uncharged<true>(handle, [&] { return real(handle); });
}
