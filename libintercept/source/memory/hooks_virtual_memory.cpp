// Virtual memory management: the physical allocation (cuMemCreate) is what
// takes device memory, on the device its properties name (the calling thread
// may have no context: NCCL's proxy threads). The driver keeps it until its
// last handle is released and its last mapping is unmapped, in either order:
// cuMemCreate -> cuMemMap -> cuMemRelease (the programming guide's own
// pattern) leaves it alive behind the mapping, and cuMemRetainAllocationHandle
// hands out one more handle to release. The charge follows the memory: it is
// given back when the driver lets go, not at the first cuMemRelease.
//
// Mappings are kept by address range, because cuMemUnmap names a range: a
// range may cover several mappings, and a driver that unmaps part of a
// mapping leaves the rest of it mapped (and the memory alive). One handle may
// be mapped at several addresses, and at an offset; each mapping holds the
// allocation.
//
// Imported handles (cuMemImportFromShareableHandle) are not charged: the
// physical memory is the exporter's, charged to the exporter for as long as
// the exporter holds it. docs/memory-accounting.md says what that leaves out.
#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "memory/accounting.h"

using namespace gpulimit;

namespace {

// One physical allocation made under a cap.
struct Physical {
  int device;         // ledger device
  uint64_t bytes;     // what cuMemCreate charged
  uint64_t handles;   // handles not yet released (cuMemCreate, each retain)
  uint64_t mappings;  // mapped ranges that reach it
};

struct HandleEntry {
  Physical* physical;
  uint64_t references;  // releases this handle value still owes
};

struct Mapping {
  size_t size;
  Physical* physical;
};

// The books of every charged physical allocation of the process, under one
// lock: virtual memory calls are rare next to launches.
class PhysicalBooks {
 public:
  std::mutex mu;

  // A new allocation with one handle; false when out of host memory. The
  // handle value may be one the driver hands out again after its release,
  // while the old allocation lives on behind a mapping.
  bool add(uint64_t handle, int device, uint64_t bytes) {
    auto* p = new (std::nothrow) Physical{device, bytes, 1, 0};
    if (!p) return false;
    try {
      handles_[handle] = HandleEntry{p, 1};
    } catch (...) {
      delete p;
      return false;
    }
    return true;
  }

  // The allocation is gone: no handle value names it any more.
  void forget(Physical* p) {
    for (auto it = handles_.begin(); it != handles_.end();)
      it = it->second.physical == p ? handles_.erase(it) : std::next(it);
  }

  // Also for a handle already released while its allocation is mapped: a
  // driver that maps it again (undefined behaviour) gets the mapping counted.
  Physical* by_handle(uint64_t handle) {
    auto it = handles_.find(handle);
    return it == handles_.end() ? nullptr : it->second.physical;
  }

  // The allocation mapped at `address`, or nullptr.
  Physical* by_address(CUdeviceptr address) {
    auto it = mappings_.upper_bound(address);
    if (it == mappings_.begin()) return nullptr;
    --it;
    return address < it->first + it->second.size ? it->second.physical : nullptr;
  }

  // One more handle on `p`, named `handle`; false when out of host memory.
  bool add_handle(uint64_t handle, Physical* p) {
    auto it = handles_.find(handle);
    if (it != handles_.end() && it->second.physical == p) {
      ++it->second.references;
    } else if (it != handles_.end() && it->second.references > 0) {
      return false;  // the driver named another live allocation so
    } else if (it != handles_.end()) {
      it->second = HandleEntry{p, 1};
    } else {
      try {
        handles_[handle] = HandleEntry{p, 1};
      } catch (...) {
        return false;
      }
    }
    ++p->handles;
    return true;
  }

  // A release of `handle` went through: returns the allocation when the
  // driver let go of it (no handle, no mapping), which the caller uncharges
  // and deletes.
  Physical* release_handle(uint64_t handle) {
    auto it = handles_.find(handle);
    if (it == handles_.end() || it->second.references == 0) return nullptr;
    Physical* p = it->second.physical;
    --it->second.references;
    --p->handles;
    if (!unused(p)) return nullptr;
    forget(p);
    return p;
  }

  bool add_mapping(CUdeviceptr at, size_t size, Physical* p) {
    try {
      mappings_[at] = Mapping{size, p};
    } catch (...) {
      return false;
    }
    ++p->mappings;
    return true;
  }

  // [at, at + size) was unmapped: what it covered of every mapping goes, the
  // rest of a mapping it cut stays mapped. Appends the allocations the driver
  // let go of to `freed`.
  void remove_range(CUdeviceptr at, size_t size, std::vector<Physical*>& freed) {
    const CUdeviceptr end = at + size;
    auto it = mappings_.upper_bound(at);
    if (it != mappings_.begin() && std::prev(it)->first + std::prev(it)->second.size > at) --it;
    std::vector<std::pair<CUdeviceptr, Mapping>> kept;  // the uncut parts
    std::vector<Physical*> touched;
    while (it != mappings_.end() && it->first < end) {
      const CUdeviceptr base = it->first;
      const Mapping m = it->second;
      if (base < at) kept.push_back({base, Mapping{at - base, m.physical}});
      if (base + m.size > end) kept.push_back({end, Mapping{base + m.size - end, m.physical}});
      --m.physical->mappings;
      touched.push_back(m.physical);
      it = mappings_.erase(it);
    }
    for (const auto& [base, m] : kept) {
      // Out of host memory here keeps the allocation counted as unmapped
      // only if nothing else holds it: it then stays charged (below).
      if (!add_mapping(base, m.size, m.physical)) m.physical->mappings += 1;
    }
    for (Physical* p : touched) {
      if (!unused(p) || std::find(freed.begin(), freed.end(), p) != freed.end()) continue;
      forget(p);
      freed.push_back(p);
    }
  }

 private:
  static bool unused(const Physical* p) { return p->handles == 0 && p->mappings == 0; }

  std::unordered_map<uint64_t, HandleEntry> handles_;
  std::map<CUdeviceptr, Mapping> mappings_;
};

PhysicalBooks& books() {
  static auto* b = new PhysicalBooks();  // never destroyed: hooks may run at exit
  return *b;
}

void give_back(Tenant* tenant, Physical* p) {
  if (tenant) tenant->release(p->device, p->bytes);
  delete p;
}

}  // namespace

GPULIMIT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  auto real = real_function(real::cuMemCreate);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tenant || !handle || !prop || size == 0 ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
    return real(handle, size, prop, flags);
  const int device = tenant->ledger_device(prop->location.id);
  if (device < 0) return real(handle, size, prop, flags);
  if (!tenant->reserve(device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult result = real(handle, size, prop, flags);
  if (result != CUDA_SUCCESS) {
    tenant->release(device, size);
    return result;
  }
  bool kept = false;
  {
    std::lock_guard<std::mutex> guard(books().mu);
    kept = books().add(*handle, device, size);
  }
  if (!kept) {
    // Out of host memory for the books: undo rather than let it escape the cap.
    real_function(real::cuMemRelease)(*handle);
    tenant->release(device, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

GPULIMIT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  auto real = real_function(real::cuMemRelease);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant) return real(handle);
  // Under the books' lock, so that no map or retain of this handle falls
  // between the driver's release and the books'.
  Physical* freed = nullptr;
  CUresult result;
  {
    std::lock_guard<std::mutex> guard(books().mu);
    result = real(handle);
    if (result == CUDA_SUCCESS) freed = books().release_handle(handle);
  }
  if (freed) give_back(tenant, freed);
  return result;
}

GPULIMIT_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                     void* addr) {
  auto real = real_function(real::cuMemRetainAllocationHandle);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant || !handle) return real(handle, addr);
  std::lock_guard<std::mutex> guard(books().mu);
  const CUresult result = real(handle, addr);
  if (result != CUDA_SUCCESS) return result;
  Physical* p = books().by_address(reinterpret_cast<CUdeviceptr>(addr));
  if (p && !books().add_handle(*handle, p)) {
    // No room to count the handle: give it back rather than lose track of
    // a reference that keeps charged memory alive.
    real_function(real::cuMemRelease)(*handle);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

GPULIMIT_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                  CUmemGenericAllocationHandle handle, unsigned long long flags) {
  auto real = real_function(real::cuMemMap);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant) return real(ptr, size, offset, handle, flags);
  std::lock_guard<std::mutex> guard(books().mu);
  const CUresult result = real(ptr, size, offset, handle, flags);
  if (result != CUDA_SUCCESS) return result;
  Physical* p = books().by_handle(handle);
  if (p && !books().add_mapping(ptr, size, p)) {
    real_function(real::cuMemUnmap)(ptr, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

GPULIMIT_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  auto real = real_function(real::cuMemUnmap);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant) return real(ptr, size);
  std::vector<Physical*> freed;
  CUresult result;
  {
    std::lock_guard<std::mutex> guard(books().mu);
    result = real(ptr, size);
    if (result == CUDA_SUCCESS) {
      try {
        books().remove_range(ptr, size, freed);
      } catch (...) {
        // Out of host memory: what could not be listed stays charged.
      }
    }
  }
  for (Physical* p : freed)
    give_back(tenant, p);
  return result;
}
