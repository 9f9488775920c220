// Virtual memory management: physical allocations (cuMemCreate, charged to
// the device), address reservations, and mappings between them. A physical
// allocation is a memfd, so mapping it really shares the bytes, and
// exporting it as a POSIX file descriptor works across processes.
//
// As on the real driver, the memory lasts until the last reference to it is
// gone in every process: an exported allocation has an IPC record in the
// shared state (shared_state.h, keyed by the memfd's inode), each importer
// opens it, and the exporter's release hands the charge to the record, which
// keeps the memory counted on the device until no importer holds it.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "context.h"
#include "memory.h"

using namespace fakecuda;

namespace {

constexpr uint32_t kPhysicalMagic = 0x9a'75'1c'0c;

struct Physical {
  uint32_t magic;
  int fd;
  size_t size;
  uint64_t charged;  // 0 for imported handles: the exporter holds the memory
  uint32_t physical;
  int ordinal;
  CUmemAllocationProp prop;
  int handle_refs;  // cuMemCreate/Import/Retain minus cuMemRelease
  int mappings;
  // Exported (by this process, which holds the charge) or imported: the
  // shared state's IPC record of the memory.
  bool exported = false;
  bool imported = false;
  uint32_t record = 0;
  uint64_t record_id = 0;
};

// The memfd's inode: what names the memory machine-wide.
uint64_t memory_id(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

struct Mapping {
  size_t size;
  Physical* phys;
  unsigned access;  // CUmemAccess_flags granted by cuMemSetAccess
};

struct Reservation {
  size_t size;
};

// Address space bookkeeping, under Driver::mu.
std::map<uintptr_t, Reservation>& reservations() {
  static auto* r = new std::map<uintptr_t, Reservation>();
  return *r;
}
std::map<uintptr_t, Mapping>& mappings() {
  static auto* m = new std::map<uintptr_t, Mapping>();
  return *m;
}

Physical* physical_from(CUmemGenericAllocationHandle handle) {
  auto* p = reinterpret_cast<Physical*>(handle);
  return Driver::get().is_live(p, kPhysicalMagic) ? p : nullptr;
}

void release_if_unused(Physical* p) {
  if (p->handle_refs > 0 || p->mappings > 0) return;
  Driver& d = Driver::get();
  if (p->imported)
    d.shared().ipc_close(p->record);
  else if (p->exported)
    d.shared().ipc_unexport(p->record, p->record_id, p->physical, p->charged);
  else if (p->charged)
    d.shared().uncharge(p->physical, p->charged);
  close(p->fd);
  d.live.erase(p);
  delete p;
}

bool inside_reservation(uintptr_t ptr, size_t size) {
  auto& r = reservations();
  auto it = r.upper_bound(ptr);
  if (it == r.begin()) return false;
  --it;
  return ptr + size <= it->first + it->second.size;
}

bool overlaps_mapping(uintptr_t ptr, size_t size) {
  for (const auto& [base, m] : mappings())
    if (ptr < base + m.size && base < ptr + size) return true;
  return false;
}

CUresult check_prop(const CUmemAllocationProp* prop) {
  FAKECUDA_REQUIRE(prop, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
                       prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE,
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(Driver::get().valid_device(prop->location.id), CUDA_ERROR_INVALID_DEVICE);
  return CUDA_SUCCESS;
}

}  // namespace

namespace fakecuda {

bool vmm_lookup_locked(uintptr_t ptr, VmmInfo* out) {
  auto& r = reservations();
  auto it = r.upper_bound(ptr);
  if (it == r.begin()) return false;
  --it;
  if (ptr >= it->first + it->second.size) return false;
  *out = VmmInfo{};
  out->reservation = it->first;
  out->reservation_size = it->second.size;
  auto m = mappings().upper_bound(ptr);
  if (m == mappings().begin()) return true;
  --m;
  if (ptr >= m->first + m->second.size) return true;
  out->mapped = true;
  out->mapping = m->first;
  out->mapping_size = m->second.size;
  out->handle_types = m->second.phys->prop.requestedHandleTypes;
  out->block_id = reinterpret_cast<uintptr_t>(m->second.phys);
  out->access = m->second.access;
  return true;
}

}  // namespace fakecuda

FAKECUDA_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                       const CUmemAllocationProp* prop,
                                                       CUmemAllocationGranularity_flags option) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(granularity, CUDA_ERROR_INVALID_VALUE);
  if (CUresult r = check_prop(prop); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(
      option == CU_MEM_ALLOC_GRANULARITY_MINIMUM || option == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
      CUDA_ERROR_INVALID_VALUE);
  *granularity = kPageSize;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                     const CUmemAllocationProp* prop, unsigned long long flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(handle && flags == 0, CUDA_ERROR_INVALID_VALUE);
  if (CUresult r = check_prop(prop); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(size > 0 && size % kPageSize == 0, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  // Charged to the device named by the property, not the current context's:
  // the caller may have no context at all.
  const uint32_t physical = d.device(prop->location.id).physical;
  if (!d.shared().charge(physical, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  int fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) < 0) {
    if (fd >= 0) close(fd);
    d.shared().uncharge(physical, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto* p = new Physical{kPhysicalMagic, fd, size, size, physical, prop->location.id, *prop, 1, 0};
  d.live.insert(p);
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(p);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  FAKECUDA_REQUIRE_INIT();
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  Physical* p = physical_from(handle);
  FAKECUDA_REQUIRE(p && p->handle_refs > 0, CUDA_ERROR_INVALID_VALUE);
  --p->handle_refs;
  // The memory goes back once the last mapping is gone too.
  release_if_unused(p);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                             CUdeviceptr addr, unsigned long long flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(ptr && flags == 0 && size > 0 && size % kPageSize == 0,
                   CUDA_ERROR_INVALID_VALUE);
  if (alignment == 0) alignment = kPageSize;
  FAKECUDA_REQUIRE((alignment & (alignment - 1)) == 0, CUDA_ERROR_INVALID_VALUE);
  (void)addr;  // a hint, which the simulator does not follow
  const size_t span = size + alignment;
  void* raw = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  FAKECUDA_REQUIRE(raw != MAP_FAILED, CUDA_ERROR_OUT_OF_MEMORY);
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = round_up(start, alignment);
  if (base > start) munmap(raw, base - start);
  if (start + span > base + size)
    munmap(reinterpret_cast<void*>(base + size), start + span - base - size);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  reservations()[base] = Reservation{size};
  *ptr = base;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  FAKECUDA_REQUIRE_INIT();
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  auto it = reservations().find(ptr);
  FAKECUDA_REQUIRE(it != reservations().end() && it->second.size == size, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(!overlaps_mapping(ptr, size), CUDA_ERROR_INVALID_VALUE);
  munmap(reinterpret_cast<void*>(ptr), size);
  reservations().erase(it);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                  CUmemGenericAllocationHandle handle, unsigned long long flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(flags == 0 && size > 0 && size % kPageSize == 0 && offset % kPageSize == 0,
                   CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  Physical* p = physical_from(handle);
  FAKECUDA_REQUIRE(p && offset + size <= p->size, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(inside_reservation(ptr, size) && !overlaps_mapping(ptr, size),
                   CUDA_ERROR_INVALID_VALUE);
  // Inaccessible until cuMemSetAccess, as on the real driver.
  void* at = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd,
                  static_cast<off_t>(offset));
  FAKECUDA_REQUIRE(at != MAP_FAILED, CUDA_ERROR_OUT_OF_MEMORY);
  mappings()[ptr] = Mapping{size, p, CU_MEM_ACCESS_FLAGS_PROT_NONE};
  ++p->mappings;
  Allocation a;
  a.base = ptr;
  a.size = size;
  a.physical = p->physical;
  a.ordinal = p->ordinal;
  a.kind = AllocationKind::kMapped;
  d.allocations[ptr] = a;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  auto it = mappings().find(ptr);
  FAKECUDA_REQUIRE(it != mappings().end() && it->second.size == size, CUDA_ERROR_INVALID_VALUE);
  // Back to reserved, inaccessible address space.
  mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  Physical* p = it->second.phys;
  mappings().erase(it);
  d.allocations.erase(ptr);
  --p->mappings;
  release_if_unused(p);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                        size_t count) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(desc && count > 0, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  // Every page of the range must be mapped.
  uintptr_t cursor = ptr;
  const uintptr_t end = ptr + size;
  while (cursor < end) {
    auto it = mappings().find(cursor);
    FAKECUDA_REQUIRE(it != mappings().end(), CUDA_ERROR_INVALID_VALUE);
    cursor += it->second.size;
  }
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    FAKECUDA_REQUIRE(
        desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE && d.valid_device(desc[i].location.id),
        CUDA_ERROR_INVALID_DEVICE);
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      prot = PROT_READ | PROT_WRITE;
    else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE)
      prot = PROT_READ;
  }
  FAKECUDA_REQUIRE(mprotect(reinterpret_cast<void*>(ptr), size, prot) == 0,
                   CUDA_ERROR_INVALID_VALUE);
  const unsigned access = prot == PROT_NONE   ? CU_MEM_ACCESS_FLAGS_PROT_NONE
                          : prot == PROT_READ ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                              : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (auto it = mappings().lower_bound(ptr); it != mappings().end() && it->first < end; ++it)
    it->second.access = access;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle,
                                                     void* addr) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(handle, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  const uintptr_t p = reinterpret_cast<uintptr_t>(addr);
  for (auto& [base, m] : mappings()) {
    if (p >= base && p < base + m.size) {
      ++m.phys->handle_refs;
      *handle = reinterpret_cast<CUmemGenericAllocationHandle>(m.phys);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

FAKECUDA_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(
    CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(prop, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  Physical* p = physical_from(handle);
  FAKECUDA_REQUIRE(p, CUDA_ERROR_INVALID_VALUE);
  *prop = p->prop;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemExportToShareableHandle(void* shareableHandle,
                                                      CUmemGenericAllocationHandle handle,
                                                      CUmemAllocationHandleType handleType,
                                                      unsigned long long flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(shareableHandle && flags == 0, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  Physical* p = physical_from(handle);
  FAKECUDA_REQUIRE(p, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR &&
                       (p->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                   CUDA_ERROR_NOT_SUPPORTED);
  if (!p->exported && !p->imported) {
    // From now on importers may hold the memory beyond this process's release.
    const uint64_t id = memory_id(p->fd);
    FAKECUDA_REQUIRE(id != 0, CUDA_ERROR_OPERATING_SYSTEM);
    FAKECUDA_REQUIRE(Driver::get().shared().ipc_export(p->physical, p->charged, id, &p->record),
                     CUDA_ERROR_OUT_OF_MEMORY);
    p->exported = true;
    p->record_id = id;
  }
  int fd = dup(p->fd);
  FAKECUDA_REQUIRE(fd >= 0, CUDA_ERROR_OPERATING_SYSTEM);
  *static_cast<int*>(shareableHandle) = fd;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle,
                                                        void* osHandle,
                                                        CUmemAllocationHandleType shHandleType) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(handle, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(shHandleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                   CUDA_ERROR_NOT_SUPPORTED);
  const int source = static_cast<int>(reinterpret_cast<intptr_t>(osHandle));
  struct stat st {};
  FAKECUDA_REQUIRE(fstat(source, &st) == 0 && st.st_size > 0, CUDA_ERROR_INVALID_VALUE);
  // The memory must still be held by its exporter; the import then holds it
  // too, on the exporter's device, until it is released.
  Driver& d = Driver::get();
  const uint64_t id = static_cast<uint64_t>(st.st_ino);
  uint32_t record = 0, physical = 0;
  uint64_t bytes = 0;
  FAKECUDA_REQUIRE(
      d.shared().ipc_find(id, &record, &physical, &bytes) && d.shared().ipc_open(record, id),
      CUDA_ERROR_INVALID_VALUE);
  int fd = dup(source);
  if (fd < 0) {
    d.shared().ipc_close(record);
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  std::lock_guard<std::mutex> guard(d.mu);
  int ordinal = 0;
  for (int i = 0; i < d.device_count(); ++i)
    if (d.device(i).physical == physical) ordinal = i;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  auto* p = new Physical{
      kPhysicalMagic, fd, static_cast<size_t>(st.st_size), 0, physical, ordinal, prop, 1, 0};
  p->imported = true;
  p->record = record;
  p->record_id = id;
  d.live.insert(p);
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(p);
  return CUDA_SUCCESS;
}
