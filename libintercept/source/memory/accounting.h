// How a hook charges the tenant for what it allocates: reserve in the ledger
// before the driver is called (one atomic step against the cap), give it back
// when the driver fails, and remember it with what was allocated so that the
// matching free returns exactly as much, once the driver has let go.
#pragma once

#include "lookup/real_driver.h"
#include "memory/tenant.h"

namespace gpulimit {

// Allocates `bytes` on ledger device `device` (or uncounted when -1) with
// `allocate(uint64_t* key)`, which returns the driver's result and the key of
// what it allocated; `undo(key)` frees it if the books cannot be kept.
// `Handles` selects the handle registry rather than the pointer one.
template <bool kHandles, typename Allocate, typename Undo>
CUresult charged(Tenant* tenant, int device, uint64_t bytes, Allocate&& allocate, Undo&& undo) {
  uint64_t key = 0;
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tenant || device < 0) return allocate(&key);
  if (!tenant->reserve(device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult result = allocate(&key);
  if (result != CUDA_SUCCESS) {
    tenant->release(device, bytes);
    return result;
  }
  const bool kept =
      kHandles ? tenant->remember_handle(key, device, bytes) : tenant->remember(key, device, bytes);
  if (!kept) {
    // Out of host memory for the books: undo rather than let it escape the cap.
    undo(key);
    tenant->release(device, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

// Frees `key` with `free()` and gives back what its allocation took.
template <bool kHandles, typename Free>
CUresult uncharged(uint64_t key, Free&& free) {
  Tenant* tenant = Tenant::limited();
  int device = -1;
  uint64_t bytes = 0;
  const bool known = tenant && (kHandles ? tenant->forget_handle(key, &device, &bytes)
                                         : tenant->forget(key, &device, &bytes));
  if (!known) return free();
  CUresult result = free();
  if (result == CUDA_SUCCESS) {
    tenant->release(device, bytes);
  } else if (kHandles) {
    tenant->remember_handle(key, device, bytes);  // still allocated
  } else {
    tenant->remember(key, device, bytes);
  }
  return result;
}

// The ledger device of the current context, with the tenant, or -1.
inline int current_device(Tenant* tenant) {
  return tenant ? tenant->current_ledger_device() : -1;
}

}  // namespace gpulimit
