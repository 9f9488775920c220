// Entry points that take or give back device memory. Under a cap, each
// allocation reserves its bytes in the tenant's ledger before the driver is
// called (one atomic step against the cap, so processes racing for the last
// bytes never exceed it together), gives them back if the driver fails, and
// remembers them with the pointer so that its free returns exactly as much.
// Over the cap the call returns CUDA_ERROR_OUT_OF_MEMORY and nothing changes.
//
// What counts: the bytes the caller asked for (for pitched memory, pitch ×
// height as the driver chose it). Devices without a cap are not counted.
#include "memory/accounting.h"
#include "memory/graph_books.h"
#include "memory/pool_books.h"

namespace {

using gpulimit::Tenant;

void free_now(uint64_t ptr) {
  gpulimit::real_function(gpulimit::real::cuMemFree_v2)(ptr);
}

// A linear allocation of `bytes` on the current device.
template <typename Allocate>
CUresult charged(uint64_t bytes, Allocate&& allocate) {
  Tenant* tenant = Tenant::limited();
  return gpulimit::charged<false>(tenant, gpulimit::current_device(tenant), bytes,
                                  std::forward<Allocate>(allocate), free_now);
}

// cuMemFree also frees stream-ordered memory (synchronising first), whose
// pool's books settle it then, and graph allocations, whose books learn it.
template <typename Free>
CUresult uncharged(CUdeviceptr ptr, Free&& free) {
  if (Tenant::limited() && gpulimit::pool_books::owns(ptr))
    return gpulimit::pool_books::free(ptr, std::forward<Free>(free));
  const CUresult result = gpulimit::uncharged<false>(ptr, std::forward<Free>(free));
  if (result == CUDA_SUCCESS) gpulimit::graph_books::freed(ptr);
  return result;
}

}  // namespace

GPULIMIT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  auto real = gpulimit::real_function(gpulimit::real::cuMemAlloc_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (!dptr || bytesize == 0) return real(dptr, bytesize);  // the driver's own error
  return charged(bytesize, [&](uint64_t* ptr) {
    CUresult r = real(dptr, bytesize);
    *ptr = *dptr;
    return r;
  });
}

GPULIMIT_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  auto real = gpulimit::real_function(gpulimit::real::cuMemAlloc);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (!dptr || bytesize == 0) return real(dptr, bytesize);
  return charged(bytesize, [&](uint64_t* ptr) {
    CUresult r = real(dptr, bytesize);
    *ptr = *dptr;
    return r;
  });
}

GPULIMIT_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  auto real = gpulimit::real_function(gpulimit::real::cuMemAllocManaged);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (!dptr || bytesize == 0) return real(dptr, bytesize, flags);
  return charged(bytesize, [&](uint64_t* ptr) {
    CUresult r = real(dptr, bytesize, flags);
    *ptr = *dptr;
    return r;
  });
}

namespace {

// The driver picks the pitch. Reserve for the widest pitch it can choose
// (rows aligned to 512 bytes; the pitch alignment is smaller on every GPU),
// then settle on what it chose.
template <typename Ptr, typename Pitch, typename Allocate, typename Free>
CUresult charged_pitch(size_t width, size_t height, Ptr* dptr, Pitch* pitch, Allocate&& allocate,
                       Free&& free) {
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  const int device = tenant ? tenant->current_ledger_device() : -1;
  if (device < 0) return allocate();
  const uint64_t reserved = (width + 511) / 512 * 512 * height;
  if (!tenant->reserve(device, reserved)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult result = allocate();
  if (result != CUDA_SUCCESS) {
    tenant->release(device, reserved);
    return result;
  }
  const uint64_t taken = static_cast<uint64_t>(*pitch) * height;
  uint64_t held = reserved;
  if (taken < reserved) {
    tenant->release(device, reserved - taken);
    held = taken;
  } else if (taken > reserved && tenant->reserve(device, taken - reserved)) {
    held = taken;
  }
  if (held != taken || !tenant->remember(*dptr, device, taken)) {
    free(*dptr);
    tenant->release(device, held);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

}  // namespace

GPULIMIT_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                            size_t height, unsigned int element_size) {
  auto real = gpulimit::real_function(gpulimit::real::cuMemAllocPitch_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (!dptr || !pitch || width == 0 || height == 0)
    return real(dptr, pitch, width, height, element_size);
  return charged_pitch(
      width, height, dptr, pitch, [&] { return real(dptr, pitch, width, height, element_size); },
      [](CUdeviceptr p) { gpulimit::real_function(gpulimit::real::cuMemFree_v2)(p); });
}

GPULIMIT_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pitch,
                                         unsigned int width, unsigned int height,
                                         unsigned int element_size) {
  auto real = gpulimit::real_function(gpulimit::real::cuMemAllocPitch);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (!dptr || !pitch || width == 0 || height == 0)
    return real(dptr, pitch, width, height, element_size);
  return charged_pitch(
      width, height, dptr, pitch, [&] { return real(dptr, pitch, width, height, element_size); },
      [](CUdeviceptr_v1 p) { gpulimit::real_function(gpulimit::real::cuMemFree)(p); });
}

GPULIMIT_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  auto real = gpulimit::real_function(gpulimit::real::cuMemFree_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return uncharged(dptr, [&] { return real(dptr); });
}

GPULIMIT_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  auto real = gpulimit::real_function(gpulimit::real::cuMemFree);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return uncharged(dptr, [&] { return real(dptr); });
}
