// The tenant this process belongs to, as far as memory goes: its limits
// (read from the environment once, at cuInit), the ledger it shares with the
// tenant's other processes, which of the devices the process sees have a cap,
// and the allocations this process made under it.
//
// With no limit in the environment (and no cap granted by gpulimitd's
// policy) nothing is attached and every hook is a pure pass-through:
// Tenant::limited() is then one relaxed load that says no.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "gpulimit/options/limits.h"

namespace gpulimit {

// A device's (total, free) as seen by a tenant with `cap` that uses `used`:
// the cap is the total, what is left of it the free memory, and neither is
// ever more than the device's own figure.
inline void narrow_to_cap(uint64_t cap, uint64_t used, uint64_t& total, uint64_t& free) {
  total = std::min(total, cap);
  free = std::min({free, cap > used ? cap - used : 0, total});
}

class Tenant {
 public:
  // The attached tenant when limits apply, else nullptr.
  static Tenant* limited() { return limited_.load(std::memory_order_acquire); }

  // True once the limits could not be read or applied: cuInit failed, and
  // every allocation fails too, should the program carry on regardless.
  static bool refused() { return refused_.load(std::memory_order_relaxed); }

  // Reads the limits and attaches; called by the cuInit hook before the real
  // cuInit (`phase` kBeforeInit: refuses with one line on stderr when a limit
  // cannot be read) and after it succeeded (`phase` kAfterInit: maps devices
  // to the ledger). Returns the error cuInit must give, or CUDA_SUCCESS.
  enum class Phase { kBeforeInit, kAfterInit };
  static CUresult attach(Phase phase);

  // The limits read at the first attach (defaults before it, or when they
  // could not be read): the launch gate takes its server and shares here.
  static options::Limits read_limits();

  // The ledger's index for CUDA device `ordinal`, or -1 when it has no cap.
  int ledger_device(CUdevice ordinal) const;
  // The ledger device of the current context's device, or -1.
  int current_ledger_device() const;

  bool reserve(int device, uint64_t bytes);
  void release(int device, uint64_t bytes);

  // Allocations made under a cap, so that each free gives back exactly what
  // its allocation took.
  bool remember(CUdeviceptr ptr, int device, uint64_t bytes);
  bool forget(CUdeviceptr ptr, int* device, uint64_t* bytes);
  // The same for objects named by handles (VMM allocations, arrays), kept
  // apart from pointers: a handle's value may equal some address.
  bool remember_handle(uint64_t handle, int device, uint64_t bytes);
  bool forget_handle(uint64_t handle, int* device, uint64_t* bytes);

  // The device as the tenant sees it: its cap and what the tenant uses
  // (under a memory total, with what the others under it hold).
  bool view(CUdevice ordinal, uint64_t* cap, uint64_t* used);
  // The same for the device with this UUID (NVML's numbering is not CUDA's).
  bool view_uuid(const unsigned char uuid[16], uint64_t* cap, uint64_t* used);

  // The device with this UUID, of `device_total` bytes, as a capped process
  // that has not called cuInit yet sees it through NVML: the cap its limits
  // give that GPU (the least of its caps while per-device caps are still
  // given by index: which index the GPU will have is not known yet), and
  // what the tenant's ledger says the tenant uses. False when the process
  // has no memory limit of its own (a cap the server grants comes at cuInit).
  static bool view_before_init(const unsigned char uuid[16], uint64_t device_total, uint64_t* cap,
                               uint64_t* used);

  // In a forked child: the parent's attachment is not the child's.
  static void detach_after_fork() { limited_.store(nullptr, std::memory_order_relaxed); }

 private:
  Tenant() = default;
  static std::atomic<Tenant*> limited_;
  static std::atomic<bool> refused_;
  friend void refuse_cuda();
};

}  // namespace gpulimit
