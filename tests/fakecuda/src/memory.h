// Giving memory back, shared by the free paths of every allocation kind.
#pragma once

#include "driver.h"

namespace fakecuda {

// Linear device memory for the current context, charged in 2 MiB pages;
// `low_32bit` serves the CUDA 2.0 ABI's 32-bit pointers.
CUresult allocate_device(size_t bytes, AllocationKind kind, bool low_32bit, uintptr_t* out);
// cuMemFree: waits for the owning context's work, then releases.
CUresult free_device(uintptr_t ptr);

// Unregisters `allocation`, returns its charge (to the device, its pool or
// the graph pool) and unmaps what we mapped (caller holds Driver::mu).
void release_allocation_locked(const Allocation& allocation);

// What an allocation going away owes IPC: an exported one hands its charge
// to its shared record, an opened one closes its open. Returns the bytes the
// caller still uncharges (caller holds Driver::mu).
uint64_t release_ipc_locked(const Allocation& allocation);

// Stream-ordered frees: give `allocation`'s bytes back to its pool.
void return_to_pool_locked(const Allocation& allocation);
// After a synchronisation, pools release what they hold above their
// CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, as the real driver does.
void trim_pools_after_sync_locked(uint32_t physical);

// Graph memory: give `allocation`'s bytes back to the device's graph pool.
void return_to_graph_pool_locked(const Allocation& allocation);

// Bytes of one element of an array of `desc` (format size times channels).
size_t array_element_bytes(const CUDA_ARRAY3D_DESCRIPTOR& desc);

// What the pointer attributes report of an address in a VMM reservation
// (caller holds Driver::mu). False when `ptr` is in none.
struct VmmInfo {
  uintptr_t reservation = 0;
  size_t reservation_size = 0;
  bool mapped = false;
  uintptr_t mapping = 0;
  size_t mapping_size = 0;
  uint64_t handle_types = 0;  // CUmemAllocationHandleType bits the allocation may export
  uint64_t block_id = 0;      // names the physical allocation
  unsigned access = 0;        // CUmemAccess_flags
};
bool vmm_lookup_locked(uintptr_t ptr, VmmInfo* out);

}  // namespace fakecuda
