// The books of memory pools (pool_books.h): per pool, its device, the bytes
// of its live allocations and the reserve beyond them charged to the tenant;
// per allocation, its pool and size.
#include "memory/pool_books.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>

#include "lookup/real_driver.h"

namespace gpulimit::pool_books {

namespace {

struct Pool {
  CUmemoryPool handle;
  CUdevice ordinal;  // CUDA device, kNotDevice for memory that is not the device's
  bool destroyed = false;
  uint64_t live = 0;   // bytes of its allocations not yet freed, each charged as such
  uint64_t extra = 0;  // charged beyond them: what the pool keeps reserved
  int ledger = -1;     // where `extra` is charged
};

struct Allocation {
  Pool* pool;
  int ledger;
  uint64_t bytes;
};

std::recursive_mutex& mu() {
  static auto* m = new std::recursive_mutex();  // never destroyed: hooks may run at exit
  return *m;
}

// Under mu().
std::unordered_map<CUmemoryPool, Pool*>& pools() {
  static auto* p = new std::unordered_map<CUmemoryPool, Pool*>();
  return *p;
}
std::unordered_map<CUdeviceptr, Allocation>& allocations() {
  static auto* a = new std::unordered_map<CUdeviceptr, Allocation>();
  return *a;
}
// How many entries allocations() has, written under mu() and read without
// it: a process that makes no stream-ordered allocation frees through the
// sharded registry alone, never through mu().
std::atomic<size_t> allocation_count{0};

// The pool's entry, made on first sight for a device's default or current
// pool; nullptr for a pool neither created through the hooks nor a device's.
Pool* find_locked(CUmemoryPool pool) {
  if (auto it = pools().find(pool); it != pools().end()) return it->second;
  auto get_count = real_function(real::cuDeviceGetCount);
  auto get_default = real_function(real::cuDeviceGetDefaultMemPool);
  auto get_current = real_function(real::cuDeviceGetMemPool);
  int count = 0;
  if (!pool || !get_count || get_count(&count) != CUDA_SUCCESS) return nullptr;
  for (CUdevice d = 0; d < count; ++d) {
    CUmemoryPool candidate = nullptr;
    const bool match =
        (get_default && get_default(&candidate, d) == CUDA_SUCCESS && candidate == pool) ||
        (get_current && get_current(&candidate, d) == CUDA_SUCCESS && candidate == pool);
    if (!match) continue;
    auto* entry = new (std::nothrow) Pool{pool, d};
    if (!entry) return nullptr;
    try {
      pools()[pool] = entry;
    } catch (...) {
      delete entry;
      return nullptr;
    }
    return entry;
  }
  return nullptr;
}

// What the driver says the pool holds, or false when it cannot say.
bool reserved_of(CUmemoryPool pool, uint64_t* bytes) {
  auto get_attribute = real_function(real::cuMemPoolGetAttribute);
  cuuint64_t value = 0;
  if (!get_attribute ||
      get_attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value) != CUDA_SUCCESS)
    return false;
  *bytes = value;
  return true;
}

// Charges the pool's reserve beyond its allocations as the driver reports it
// now. Growth that the cap cannot take stays uncharged until the next
// settling (the pool then holds more than the cap allows; the next
// allocation from it is refused). A pool the driver no longer describes
// (destroyed, or a driver without the attribute) keeps no reserve.
void settle_locked(Tenant* tenant, CUmemoryPool handle, Pool* pool) {
  if (!tenant || pool->ledger < 0) return;
  uint64_t reserved = 0;
  const bool known = !pool->destroyed && reserved_of(handle, &reserved);
  const uint64_t target = known && reserved > pool->live ? reserved - pool->live : 0;
  if (target < pool->extra) {
    tenant->release(pool->ledger, pool->extra - target);
    pool->extra = target;
  } else if (target > pool->extra && tenant->reserve(pool->ledger, target - pool->extra)) {
    pool->extra = target;
  }
}

void delete_if_done_locked(Pool* pool) {
  if (pool->destroyed && pool->live == 0) delete pool;
}

thread_local bool reclaiming = false;

}  // namespace

void lock() {
  mu().lock();
}

void unlock() {
  mu().unlock();
}

CUdevice pool_device(CUmemoryPool pool) {
  std::lock_guard<std::recursive_mutex> guard(mu());
  Pool* p = find_locked(pool);
  return p ? p->ordinal : kUnknown;
}

bool take(Tenant* tenant, CUmemoryPool handle, CUdevice ordinal, uint64_t bytes) {
  Pool* pool = find_locked(handle);
  const int ledger = tenant->ledger_device(ordinal);
  if (!pool || ledger < 0) return false;
  pool->ledger = ledger;
  settle_locked(tenant, handle, pool);
  // What the pool keeps is the tenant's already: an allocation it can serve
  // from there takes nothing more from the cap.
  const uint64_t from_reserve = std::min(bytes, pool->extra);
  if (bytes > from_reserve && !tenant->reserve(ledger, bytes - from_reserve)) return false;
  pool->extra -= from_reserve;
  pool->live += bytes;
  return true;
}

void untake(Tenant* tenant, CUmemoryPool handle, uint64_t bytes) {
  Pool* pool = find_locked(handle);
  if (!pool) return;
  pool->live -= bytes;
  pool->extra += bytes;
  settle_locked(tenant, handle, pool);
}

bool record(Tenant* tenant, CUmemoryPool handle, CUdeviceptr ptr, uint64_t bytes) {
  Pool* pool = find_locked(handle);
  if (!pool) return false;
  try {
    allocations()[ptr] = Allocation{pool, pool->ledger, bytes};
    allocation_count.store(allocations().size(), std::memory_order_release);
  } catch (...) {
    return false;
  }
  settle_locked(tenant, handle, pool);
  return true;
}

bool owns(CUdeviceptr ptr) {
  // The pointer came from an allocation that returned after recording it,
  // so a free of a recorded one sees a count above zero.
  if (allocation_count.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::recursive_mutex> guard(mu());
  return allocations().count(ptr) != 0;
}

void forget(Tenant* tenant, CUdeviceptr ptr) {
  auto it = allocations().find(ptr);
  if (it == allocations().end()) return;
  const Allocation a = it->second;
  allocations().erase(it);
  allocation_count.store(allocations().size(), std::memory_order_release);
  Pool* pool = a.pool;
  pool->live -= a.bytes;
  if (pool->destroyed) {
    // Nothing to read any more: the driver frees a destroyed pool's memory
    // with its last allocation.
    if (tenant) tenant->release(a.ledger, a.bytes);
    delete_if_done_locked(pool);
    return;
  }
  // The freed memory stays in the pool until the driver says otherwise.
  pool->extra += a.bytes;
  settle_locked(tenant, pool->handle, pool);
}

void created(CUmemoryPool handle, const CUmemPoolProps* props) {
  std::lock_guard<std::recursive_mutex> guard(mu());
  const CUdevice ordinal =
      props->location.type == CU_MEM_LOCATION_TYPE_DEVICE ? props->location.id : kNotDevice;
  auto* entry = new (std::nothrow) Pool{handle, ordinal};
  if (!entry) return;  // found again, if it is a device's pool; else uncharged like a host pool
  try {
    auto [it, inserted] = pools().try_emplace(handle, entry);
    if (!inserted) {
      // A handle value the driver reuses after a destroy the hooks missed.
      delete entry;
      it->second->ordinal = ordinal;
    }
  } catch (...) {
    delete entry;
  }
}

void destroyed(CUmemoryPool handle) {
  std::lock_guard<std::recursive_mutex> guard(mu());
  auto it = pools().find(handle);
  if (it == pools().end()) return;
  Pool* pool = it->second;
  pools().erase(it);
  pool->destroyed = true;
  // What the pool kept beyond its allocations goes back to the device now;
  // what is still allocated stays charged until it is freed.
  if (Tenant* tenant = Tenant::limited(); tenant && pool->extra && pool->ledger >= 0)
    tenant->release(pool->ledger, pool->extra);
  pool->extra = 0;
  delete_if_done_locked(pool);
}

void trimmed(CUmemoryPool handle) {
  std::lock_guard<std::recursive_mutex> guard(mu());
  if (auto it = pools().find(handle); it != pools().end())
    settle_locked(Tenant::limited(), handle, it->second);
}

void reclaim() {
  if (reclaiming) return;  // a reservation made while settling fails without a second round
  reclaiming = true;
  {
    std::lock_guard<std::recursive_mutex> guard(mu());
    Tenant* tenant = Tenant::limited();
    for (const auto& [handle, pool] : pools())
      if (pool->extra) settle_locked(tenant, handle, pool);
  }
  reclaiming = false;
}

}  // namespace gpulimit::pool_books
