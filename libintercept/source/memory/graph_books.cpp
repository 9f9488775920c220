// The books of graph memory (graph_books.h): per ledger device, what the
// live executable graphs are bound to, what destroyed ones left allocated and
// what the pool was last read to hold; per executable graph, its footprint;
// per allocation node a launch may leave allocated, whether it is.
#include "memory/graph_books.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "lookup/real_driver.h"

namespace gpulimit::graph_books {

namespace {

struct Device {
  CUdevice ordinal = -1;  // of the allocation nodes charged here
  uint64_t bound = 0;     // allocation nodes of the live executable graphs
  uint64_t orphaned = 0;  // allocated by graphs since destroyed, not yet freed
  uint64_t reserved = 0;  // the pool, when last read
  uint64_t charged = 0;   // on the ledger: max(bound + orphaned, reserved), or less
                          // where the pool outgrew the cap
};

// An allocation node whose allocation outlives the launch that makes it.
struct Entry {
  int ledger;
  uint64_t bytes;
  CUgraphExec owner;  // the live executable graph that allocates it, or nullptr
  bool live;          // allocated by a launch and not freed since
  bool orphaned;      // live and charged in Device::orphaned, not by its owner's bound
};

std::recursive_mutex& mu() {
  static auto* m = new std::recursive_mutex();  // never destroyed: hooks may run at exit
  return *m;
}
// This thread holds mu(): a reservation that fails while the books are being
// changed must not settle them under itself.
thread_local int depth = 0;

// Under mu().
Device devices[shm::kMaxDevices];
std::unordered_map<CUgraphExec, Footprint>& execs() {
  static auto* e = new std::unordered_map<CUgraphExec, Footprint>();
  return *e;
}
std::unordered_map<CUdeviceptr, Entry>& allocations() {
  static auto* a = new std::unordered_map<CUdeviceptr, Entry>();
  return *a;
}
// Sizes of the two maps, written under mu() and read without it, so that a
// process without graph memory launches and frees without taking mu().
std::atomic<size_t> exec_count{0};
std::atomic<size_t> allocation_count{0};

void counted() {
  exec_count.store(execs().size(), std::memory_order_relaxed);
  allocation_count.store(allocations().size(), std::memory_order_relaxed);
}

uint64_t read_reserved(CUdevice ordinal) {
  auto get = real_function(real::cuDeviceGetGraphMemAttribute);
  cuuint64_t value = 0;
  if (ordinal < 0 || !get ||
      get(ordinal, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &value) != CUDA_SUCCESS)
    return 0;  // unreadable: the nodes' sizes are all there is to charge
  return value;
}

uint64_t target(const Device& device, uint64_t extra_bound = 0) {
  return std::max(device.bound + extra_bound + device.orphaned, device.reserved);
}

// Reads the pool of ledger device `d` again and brings its charge to what
// the books now say. A charge that must grow past the cap stays where it is:
// the pool outgrew the nodes' sizes by its own rounding.
void settle(Tenant* tenant, int d) {
  Device& device = devices[d];
  device.reserved = read_reserved(device.ordinal);
  const uint64_t want = target(device);
  if (want < device.charged) {
    tenant->release(d, device.charged - want);
    device.charged = want;
  } else if (want > device.charged && tenant->reserve(d, want - device.charged)) {
    device.charged = want;
  }
}

// The allocation `entry` at `it` is no longer allocated.
void unlive(Tenant* tenant, std::unordered_map<CUdeviceptr, Entry>::iterator it) {
  Entry& entry = it->second;
  entry.live = false;
  const int d = entry.ledger;
  if (entry.orphaned) {
    entry.orphaned = false;
    devices[d].orphaned -= entry.bytes;
  }
  if (!entry.owner) allocations().erase(it);
  if (tenant) settle(tenant, d);  // its memory went back to the pool, which still holds it
}

}  // namespace

void lock() {
  mu().lock();
  ++depth;
}

void unlock() {
  --depth;
  mu().unlock();
}

bool Footprint::empty() const {
  return std::all_of(std::begin(bytes), std::end(bytes), [](uint64_t b) { return b == 0; }) &&
         frees.empty();
}

bool charge(Tenant* tenant, const Footprint& footprint) {
  Lock held;
  uint64_t taken[shm::kMaxDevices] = {};
  for (int d = 0; d < static_cast<int>(shm::kMaxDevices); ++d) {
    if (!footprint.bytes[d]) continue;
    Device& device = devices[d];
    device.ordinal = footprint.ordinal[d];
    device.reserved = read_reserved(device.ordinal);
    const uint64_t want = target(device, footprint.bytes[d]);
    taken[d] = want > device.charged ? want - device.charged : 0;
    if (taken[d] && !tenant->reserve(d, taken[d])) {
      for (int back = 0; back < d; ++back)
        if (taken[back]) tenant->release(back, taken[back]);
      for (int back = 0; back < d; ++back)
        devices[back].charged -= taken[back];
      return false;
    }
    device.charged += taken[d];
  }
  for (int d = 0; d < static_cast<int>(shm::kMaxDevices); ++d)
    devices[d].bound += footprint.bytes[d];
  return true;
}

void uncharge(Tenant* tenant, const Footprint& footprint) {
  Lock held;
  for (int d = 0; d < static_cast<int>(shm::kMaxDevices); ++d) {
    if (!footprint.bytes[d]) continue;
    devices[d].bound -= footprint.bytes[d];
    settle(tenant, d);
  }
}

bool record(CUgraphExec exec, const Footprint& footprint) {
  Lock held;
  std::vector<CUdeviceptr> added;
  try {
    added.reserve(footprint.unfreed.size());
    for (const Allocation& a : footprint.unfreed) {
      auto [it, inserted] =
          allocations().try_emplace(a.ptr, Entry{a.ledger, a.bytes, exec, false, false});
      if (inserted)
        added.push_back(a.ptr);
      else
        it->second.owner = exec;  // instantiated again while a launch's allocation lives
    }
    execs().emplace(exec, footprint);
  } catch (...) {
    // Out of host memory: the caller destroys the executable graph.
    for (CUdeviceptr ptr : added)
      allocations().erase(ptr);
    for (auto& [ptr, entry] : allocations())
      if (entry.owner == exec) entry.owner = nullptr;
    counted();
    return false;
  }
  counted();
  return true;
}

bool recorded(CUgraphExec exec) {
  if (exec_count.load(std::memory_order_relaxed) == 0) return false;
  Lock held;
  return execs().count(exec) != 0;
}

void destroyed(Tenant* tenant, CUgraphExec exec) {
  Lock held;
  auto it = execs().find(exec);
  if (it == execs().end()) return;
  const Footprint& footprint = it->second;
  for (const Allocation& a : footprint.unfreed) {
    auto entry = allocations().find(a.ptr);
    if (entry == allocations().end() || entry->second.owner != exec) continue;
    Entry& e = entry->second;
    e.owner = nullptr;
    if (e.live && !e.orphaned) {
      e.orphaned = true;
      devices[e.ledger].orphaned += e.bytes;
    }
    if (!e.live) allocations().erase(entry);
  }
  for (int d = 0; d < static_cast<int>(shm::kMaxDevices); ++d) {
    if (!footprint.bytes[d]) continue;
    devices[d].bound -= footprint.bytes[d];
    settle(tenant, d);
  }
  execs().erase(it);
  counted();
}

void launched(CUgraphExec exec) {
  if (exec_count.load(std::memory_order_relaxed) == 0) return;
  Lock held;
  auto it = execs().find(exec);
  if (it == execs().end()) return;
  Tenant* tenant = Tenant::limited();
  for (const Allocation& a : it->second.unfreed) {
    auto entry = allocations().find(a.ptr);
    if (entry == allocations().end()) continue;
    Entry& e = entry->second;
    e.live = true;
    if (e.orphaned) {
      // Freed by this launch (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
      // and allocated again: its owner's bound covers it now.
      e.orphaned = false;
      devices[e.ledger].orphaned -= e.bytes;
      if (tenant) settle(tenant, e.ledger);
    }
  }
  for (CUdeviceptr ptr : it->second.frees)
    if (auto entry = allocations().find(ptr); entry != allocations().end()) unlive(tenant, entry);
  counted();
}

void freed(CUdeviceptr ptr) {
  if (allocation_count.load(std::memory_order_relaxed) == 0) return;
  Lock held;
  auto entry = allocations().find(ptr);
  if (entry == allocations().end()) return;
  unlive(Tenant::limited(), entry);
  counted();
}

void trimmed(Tenant* tenant, CUdevice ordinal) {
  const int d = tenant->ledger_device(ordinal);
  if (d < 0) return;
  Lock held;
  if (devices[d].ordinal == ordinal) settle(tenant, d);
}

bool tracks_allocations() {
  return allocation_count.load(std::memory_order_relaxed) != 0;
}

void reclaim() {
  if (depth > 0) return;  // settling already, under a reservation of the books' own
  Tenant* tenant = Tenant::limited();
  if (!tenant) return;
  Lock held;
  for (int d = 0; d < static_cast<int>(shm::kMaxDevices); ++d)
    if (devices[d].charged > devices[d].bound + devices[d].orphaned) settle(tenant, d);
}

}  // namespace gpulimit::graph_books
