// What memory pools hold, charged: the stream-ordered allocations made from
// them (cuMemAllocAsync, cuMemAllocFromPoolAsync), and what a pool keeps
// reserved beyond them after they are freed. A pool gives freed memory back
// to the device only at a synchronisation that finds it above its release
// threshold (never, with PyTorch's UINT64_MAX), so the tenant is charged
// what the driver says the pool holds (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT):
// each allocation as such, and the pool's reserve beyond its allocations,
// read again at each allocation, free and trim from the pool, and whenever a
// reservation against the cap fails (the pool may have shrunk since).
//
// Each pool's device is where its memory lands: the location it was created
// with (seen by the cuMemPoolCreate hook: its properties cannot be read back
// on every driver), or the device whose default or current pool it is.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "memory/tenant.h"

namespace gpulimit::pool_books {

// The CUDA device `pool` allocates on; kNotDevice when its memory is not
// device memory (a host pool), kUnknown for a pool neither created through
// the hooks nor a device's default or current pool.
inline constexpr CUdevice kNotDevice = -1;
inline constexpr CUdevice kUnknown = -2;
CUdevice pool_device(CUmemoryPool pool);

// The allocation function fills `*ptr`; `undo(ptr)` frees it when the books
// cannot be kept. Charged against the ledger device of `ordinal`, the
// pool's device.
template <typename Allocate, typename Undo>
CUresult allocate(Tenant* tenant, CUmemoryPool pool, CUdevice ordinal, uint64_t bytes,
                  Allocate&& allocate, Undo&& undo);

// True when `ptr` is a stream-ordered allocation these books charged.
bool owns(CUdeviceptr ptr);

// Frees `ptr` (which owns() confirmed) with `free()` and settles its pool.
template <typename Free>
CUresult free(CUdeviceptr ptr, Free&& free);

// The hooks of pool management tell the books what happened.
void created(CUmemoryPool pool, const CUmemPoolProps* props);
void destroyed(CUmemoryPool pool);
void trimmed(CUmemoryPool pool);

// Reads every pool's reserve again and gives back what they let go of since:
// Tenant::reserve calls it before it refuses.
void reclaim();

// ---- The templates' non-template parts --------------------------------------------

// Held across an allocation or a free and the books' update (recursive:
// a reservation that fails reclaims under it).
void lock();
void unlock();
// Takes `bytes` for a new allocation from `pool`: first from what the pool
// keeps charged beyond its allocations, then from the cap. False when over
// the cap (nothing taken).
bool take(Tenant* tenant, CUmemoryPool pool, CUdevice ordinal, uint64_t bytes);
// Undoes take() after the driver failed.
void untake(Tenant* tenant, CUmemoryPool pool, uint64_t bytes);
// Records the allocation; false when out of host memory (then undone by the
// caller, with untake()).
bool record(Tenant* tenant, CUmemoryPool pool, CUdeviceptr ptr, uint64_t bytes);
// The allocation `ptr` was freed: its charge becomes the pool's reserve,
// which is then read again.
void forget(Tenant* tenant, CUdeviceptr ptr);

struct Lock {
  Lock() { lock(); }
  ~Lock() { unlock(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
};

template <typename Allocate, typename Undo>
CUresult allocate(Tenant* tenant, CUmemoryPool pool, CUdevice ordinal, uint64_t bytes,
                  Allocate&& allocate, Undo&& undo) {
  Lock held;
  if (!take(tenant, pool, ordinal, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUdeviceptr ptr = 0;
  const CUresult result = allocate(&ptr);
  if (result != CUDA_SUCCESS) {
    untake(tenant, pool, bytes);
    return result;
  }
  if (!record(tenant, pool, ptr, bytes)) {
    // Out of host memory for the books: undo rather than let it escape the cap.
    undo(ptr);
    untake(tenant, pool, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

template <typename Free>
CUresult free(CUdeviceptr ptr, Free&& free) {
  Lock held;
  const CUresult result = free();
  if (result == CUDA_SUCCESS) forget(Tenant::limited(), ptr);
  return result;
}

}  // namespace gpulimit::pool_books
