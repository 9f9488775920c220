// What graph memory holds, charged. A graph's allocation nodes are backed
// from the device's graph memory pool when the graph is launched, and live
// until a free node, cuMemFreeAsync or cuMemFree frees them, which may be
// after the executable graph is gone; the pool keeps what it backed until
// cuDeviceGraphMemTrim. The books charge each device, per ledger device:
//
//   max(bound + orphaned, reserved)
//
//   bound     the sizes of the allocation nodes of every executable graph
//             alive, charged from before its instantiation (an upper bound
//             on what launching it can add);
//   orphaned  allocations launched and not freed whose executable graph was
//             destroyed, each charged until it is freed;
//   reserved  what the driver says the pool holds
//             (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), read whenever it may
//             have shrunk or outgrown the rest: at destroy, trim, and before
//             a reservation is refused.
//
// The pool grows only at a launch, by what the launched graph allocates
// beyond what the pool can reuse, so it never outgrows bound + orphaned
// unless the driver rounds its reservations up; that rounding is charged at
// the next read. hooks_graphs.cpp reads each graph's footprint; the launch,
// free and trim hooks tell the books what happened.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "gpulimit/shm/tenant_ledger.h"
#include "memory/tenant.h"

namespace gpulimit::graph_books {

// One allocation node.
struct Allocation {
  CUdeviceptr ptr;  // fixed for the life of its graph, in every launch
  int ledger;       // ledger device
  CUdevice ordinal;
  uint64_t bytes;
};

// What an executable graph's memory nodes do, read from the graph it is
// instantiated from (child graphs it owns included).
struct Footprint {
  uint64_t bytes[shm::kMaxDevices] = {};  // every allocation node, per ledger device
  CUdevice ordinal[shm::kMaxDevices] = {};
  std::vector<Allocation> unfreed;  // allocated by a launch and not freed by the graph itself
  std::vector<CUdeviceptr> frees;   // what its free nodes free of other graphs' allocations

  bool empty() const;
};

// Charges `footprint` before its instantiation; false when over the cap
// (nothing charged).
bool charge(Tenant* tenant, const Footprint& footprint);
// The instantiation failed: gives back what charge() took.
void uncharge(Tenant* tenant, const Footprint& footprint);
// Records the executable graph charge() paid for; false when out of host
// memory (the caller destroys it and calls uncharge()).
bool record(CUgraphExec exec, const Footprint& footprint);

// Destroys `exec` with `destroy()`; what its launches left allocated stays
// charged until freed, and the pool's reserve until trimmed.
template <typename Destroy>
CUresult destroy(Tenant* tenant, CUgraphExec exec, Destroy&& destroy);

// Hooks tell the books: `exec` was launched; `ptr` was freed outside any
// graph (cuMemFree, or cuMemFreeAsync on a stream not capturing); the graph
// memory of CUDA device `ordinal` was trimmed.
void launched(CUgraphExec exec);
void freed(CUdeviceptr ptr);
void trimmed(Tenant* tenant, CUdevice ordinal);

// True while any allocation node is known: until then freed() has nothing
// to do, and the free hooks need not ask whether a stream is capturing.
bool tracks_allocations();

// Reads every charged device's pool again and gives back what it let go of:
// Tenant::reserve calls it before it refuses.
void reclaim();

// ---- The template's non-template parts --------------------------------------------

// Held across a destroy and the books' update.
void lock();
void unlock();
struct Lock {
  Lock() { lock(); }
  ~Lock() { unlock(); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
};
// True when the books charged `exec`.
bool recorded(CUgraphExec exec);
// The executable graph `exec` was destroyed.
void destroyed(Tenant* tenant, CUgraphExec exec);

template <typename Destroy>
CUresult destroy(Tenant* tenant, CUgraphExec exec, Destroy&& destroy) {
  Lock held;
  if (!recorded(exec)) return destroy();
  const CUresult result = destroy();
  if (result == CUDA_SUCCESS) destroyed(tenant, exec);
  return result;
}

}  // namespace gpulimit::graph_books
