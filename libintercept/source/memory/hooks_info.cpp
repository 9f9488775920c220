// What the device looks like from inside a tenant with a cap: the cap is the
// device's total, and the cap minus what the whole tenant uses is its free
// memory; never more than the device really has free, never negative. The
// driver's own answer comes first, so its errors (NULL outputs, no context)
// are its own.
#include <algorithm>
#include <climits>

#include "lookup/real_driver.h"
#include "memory/tenant.h"

namespace {

using gpulimit::Tenant;

// Narrows the driver's (free, total) of the current device to the tenant's.
void narrow_to_tenant(uint64_t* free, uint64_t* total) {
  Tenant* tenant = Tenant::limited();
  CUdevice ordinal = -1;
  auto get_device = gpulimit::real_function(gpulimit::real::cuCtxGetDevice);
  uint64_t cap = 0, used = 0;
  if (!tenant || !get_device || get_device(&ordinal) != CUDA_SUCCESS ||
      !tenant->view(ordinal, &cap, &used))
    return;
  gpulimit::narrow_to_cap(cap, used, *total, *free);
}

}  // namespace

GPULIMIT_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  auto real = gpulimit::real_function(gpulimit::real::cuMemGetInfo_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  CUresult result = real(free, total);
  if (result != CUDA_SUCCESS) return result;
  uint64_t f = *free, t = *total;
  narrow_to_tenant(&f, &t);
  *free = f;
  *total = t;
  return CUDA_SUCCESS;
}

GPULIMIT_EXPORT CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  auto real = gpulimit::real_function(gpulimit::real::cuMemGetInfo);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  CUresult result = real(free, total);
  if (result != CUDA_SUCCESS) return result;
  uint64_t f = *free, t = *total;  // already saturated by the driver
  narrow_to_tenant(&f, &t);
  *free = static_cast<unsigned int>(f);
  *total = static_cast<unsigned int>(t);
  return CUDA_SUCCESS;
}

namespace {

uint64_t tenant_total(CUdevice ordinal, uint64_t total) {
  Tenant* tenant = Tenant::limited();
  uint64_t cap = 0, used = 0;
  if (tenant && tenant->view(ordinal, &cap, &used)) return std::min(total, cap);
  return total;
}

}  // namespace

GPULIMIT_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  auto real = gpulimit::real_function(gpulimit::real::cuDeviceTotalMem_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  CUresult result = real(bytes, dev);
  if (result == CUDA_SUCCESS) *bytes = tenant_total(dev, *bytes);
  return result;
}

GPULIMIT_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  auto real = gpulimit::real_function(gpulimit::real::cuDeviceTotalMem);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  CUresult result = real(bytes, dev);
  if (result == CUDA_SUCCESS) *bytes = static_cast<unsigned int>(tenant_total(dev, *bytes));
  return result;
}
