// Interprocess memory and event handles (cuIpc*), between processes of one
// simulated machine (the same FAKECUDA_STATE).
//
// Device memory is private anonymous address space until it is first
// exported; cuIpcGetMemHandle then moves its bytes into a memfd mapped at the
// same address, so the exporter keeps its pointer. The 64-byte handle names
// the exporter's pid and descriptor; the opener takes the memfd through
// /proc/<pid>/fd/<n>, checks its inode against the handle and maps it, so
// writes are visible both ways. The charge stays with the exporter; the
// shared state's IPC record (see shared_state.h) keeps it on the device until
// the last process mapping the memory closes it or dies, as the real driver
// keeps the physical memory alive.
//
// Events: an exported event keeps its generations in a memfd page; openers
// map it, so records, queries and waits see each other's.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "context.h"
#include "memory.h"

using namespace fakecuda;

namespace {

constexpr uint32_t kMemHandleMagic = 0x6d'69'63'66;    // "fcim"
constexpr uint32_t kEventHandleMagic = 0x65'69'63'66;  // "fcie"

// What a CUipcMemHandle carries.
struct MemHandle {
  uint32_t magic;
  uint32_t record;  // the shared state's IPC record
  int32_t pid;      // the exporter
  int32_t fd;       // the memfd, in the exporter
  uint64_t inode;   // the memfd's, which the opener checks
  uint64_t fs_device;
  uint64_t mapped;  // bytes of the mapping
  uint64_t size;    // bytes of the allocation
  uint32_t physical;
  uint32_t unused[3];
};
static_assert(sizeof(MemHandle) == CU_IPC_HANDLE_SIZE);

struct EventHandle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  uint32_t unused0;
  uint64_t inode;
  uint64_t fs_device;
  uint32_t unused[8];
};
static_assert(sizeof(EventHandle) == CU_IPC_HANDLE_SIZE);

constexpr size_t kEventPageBytes = 4096;

// Opens descriptor `fd` of process `pid` and checks that it is the file the
// handle names; -1 when the process, the descriptor or the file is gone.
int open_exported(int32_t pid, int32_t fd, uint64_t inode, uint64_t fs_device) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(pid), static_cast<int>(fd));
  const int mine = ::open(path, O_RDWR | O_CLOEXEC);
  if (mine < 0) return -1;
  struct stat st {};
  if (fstat(mine, &st) < 0 || st.st_ino != inode || st.st_dev != fs_device) {
    close(mine);
    return -1;
  }
  return mine;
}

// Writes the pages of [base, base + bytes) that were ever touched (present
// or swapped out, as /proc/self/pagemap tells) into `fd` at the same
// offsets; untouched pages read as zero in both. Without pagemap, all of it.
bool copy_touched_pages(void* base, size_t bytes, int fd) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t pages = (bytes + page - 1) / page;
  std::vector<uint64_t> entries(pages);
  const int map = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  const off_t first = static_cast<off_t>(reinterpret_cast<uintptr_t>(base) / page * 8);
  const ssize_t want = static_cast<ssize_t>(pages * 8);
  const bool known = map >= 0 && pread(map, entries.data(), pages * 8, first) == want;
  if (map >= 0) close(map);
  if (!known) return pwrite(fd, base, bytes, 0) == static_cast<ssize_t>(bytes);
  constexpr uint64_t kPresentOrSwapped = (1ull << 63) | (1ull << 62);
  for (size_t i = 0; i < pages;) {
    if (!(entries[i] & kPresentOrSwapped)) {
      ++i;
      continue;
    }
    size_t run = i;
    while (run < pages && (entries[run] & kPresentOrSwapped))
      ++run;
    const size_t offset = i * page;
    const size_t length = std::min(bytes, run * page) - offset;
    if (pwrite(fd, static_cast<char*>(base) + offset, length, static_cast<off_t>(offset)) !=
        static_cast<ssize_t>(length))
      return false;
    i = run;
  }
  return true;
}

// Moves `a`'s bytes into a memfd mapped at the same address (caller holds
// Driver::mu, so no copy of the simulator's touches them meanwhile).
CUresult make_shareable_locked(Allocation& a) {
  const int fd = memfd_create("fakecuda-ipc", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  void* base = reinterpret_cast<void*>(a.base);
  if (ftruncate(fd, static_cast<off_t>(a.mapped)) < 0 || !copy_touched_pages(base, a.mapped, fd)) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (mmap(base, a.mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
    close(fd);
    return CUDA_ERROR_MAP_FAILED;
  }
  struct stat st {};
  fstat(fd, &st);
  a.ipc_fd = fd;
  a.ipc_id = st.st_ino;
  return CUDA_SUCCESS;
}

}  // namespace

namespace fakecuda {

uint64_t release_ipc_locked(const Allocation& a) {
  SharedState& shared = Driver::get().shared();
  if (a.kind == AllocationKind::kIpc) {
    shared.ipc_close(a.ipc_record);
    return 0;
  }
  if (a.ipc_fd < 0) return a.charged;
  close(a.ipc_fd);
  shared.ipc_unexport(a.ipc_record, a.ipc_id, a.physical, a.charged);
  return 0;
}

}  // namespace fakecuda

CUevent_st::~CUevent_st() {
  if (!ipc) return;
  munmap(ipc, kEventPageBytes);
  if (ipc_fd >= 0) close(ipc_fd);
}

FAKECUDA_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pHandle, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  // Only cuMemAlloc'ed memory (the legacy IPC-capable kind); the handle
  // names the whole allocation.
  Allocation* a = find_allocation(dptr);
  FAKECUDA_REQUIRE(a && a->kind == AllocationKind::kLinear && a->mapped, CUDA_ERROR_INVALID_VALUE);
  if (a->ipc_fd < 0) {
    if (CUresult r = make_shareable_locked(*a); r != CUDA_SUCCESS) return r;
    if (!d.shared().ipc_export(a->physical, a->charged, a->ipc_id, &a->ipc_record)) {
      // The table is full: stay shareable, export later.
      close(a->ipc_fd);
      a->ipc_fd = -1;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  MemHandle h{};
  h.magic = kMemHandleMagic;
  h.record = a->ipc_record;
  h.pid = getpid();
  h.fd = a->ipc_fd;
  h.inode = a->ipc_id;
  struct stat st {};
  fstat(a->ipc_fd, &st);
  h.fs_device = st.st_dev;
  h.mapped = a->mapped;
  h.size = a->size;
  h.physical = a->physical;
  static_assert(sizeof(h) == sizeof(pHandle->reserved));
  std::memcpy(pHandle->reserved, &h, sizeof h);
  return CUDA_SUCCESS;
}

static CUresult ipc_open_mem(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pdptr, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE((flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == 0, CUDA_ERROR_INVALID_VALUE);
  MemHandle h;
  std::memcpy(&h, handle.reserved, sizeof h);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(h.magic == kMemHandleMagic && h.mapped > 0, CUDA_ERROR_INVALID_VALUE);
  // The real driver refuses a handle exported by the calling process.
  FAKECUDA_REQUIRE(h.pid != getpid(), CUDA_ERROR_INVALID_CONTEXT);
  // Opened before by this context: one more reference, the same pointer.
  for (auto& [base, a] : d.allocations) {
    if (a.kind == AllocationKind::kIpc && a.ctx == ctx && a.ipc_id == h.inode &&
        a.ipc_record == h.record) {
      ++a.ipc_refs;
      *pdptr = base;
      return CUDA_SUCCESS;
    }
  }
  const int fd = open_exported(h.pid, h.fd, h.inode, h.fs_device);
  FAKECUDA_REQUIRE(fd >= 0, CUDA_ERROR_INVALID_HANDLE);
  // Registered as a mapping before it is mapped, so the exporter's free
  // cannot slip in between and drop the memory's charge.
  if (!d.shared().ipc_open(h.record, h.inode)) {
    close(fd);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  void* base = mmap(nullptr, h.mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);  // the mapping keeps the memory
  if (base == MAP_FAILED) {
    d.shared().ipc_close(h.record);
    return CUDA_ERROR_MAP_FAILED;
  }
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(base);
  a.size = h.size;
  a.mapped = h.mapped;
  a.physical = h.physical;
  a.ordinal = ctx->ordinal;
  for (int i = 0; i < d.device_count(); ++i)
    if (d.device(i).physical == h.physical) a.ordinal = i;
  a.kind = AllocationKind::kIpc;
  a.ctx = ctx;
  a.ipc_record = h.record;
  a.ipc_id = h.inode;
  a.ipc_refs = 1;
  d.allocations[a.base] = a;
  *pdptr = a.base;
  return CUDA_SUCCESS;
}

// CUDA 4.1's name and CUDA 11.0's _v2 take the same arguments.
FAKECUDA_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                            unsigned int Flags) {
  return ipc_open_mem(pdptr, handle, Flags);
}
FAKECUDA_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                               unsigned int Flags) {
  return ipc_open_mem(pdptr, handle, Flags);
}

FAKECUDA_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  auto it = d.allocations.find(dptr);
  FAKECUDA_REQUIRE(it != d.allocations.end() && it->second.kind == AllocationKind::kIpc,
                   CUDA_ERROR_INVALID_VALUE);
  if (--it->second.ipc_refs > 0) return CUDA_SUCCESS;
  release_allocation_locked(it->second);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle* pHandle, CUevent event) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pHandle, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(event, kEventMagic), CUDA_ERROR_INVALID_HANDLE);
  constexpr unsigned kNeeded = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  FAKECUDA_REQUIRE((event->flags & kNeeded) == kNeeded, CUDA_ERROR_INVALID_HANDLE);
  // An event opened from another process is exported again as its origin's.
  if (!event->ipc) {
    // One page per event, made at its first export and kept until destroyed.
    const int fd = memfd_create("fakecuda-ipc-event", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    void* page = MAP_FAILED;
    if (ftruncate(fd, kEventPageBytes) == 0)
      page = mmap(nullptr, kEventPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) {
      close(fd);
      return CUDA_ERROR_MAP_FAILED;
    }
    auto* shared = new (page) IpcEventPage{};
    shared->recorded.store(event->recorded, std::memory_order_relaxed);
    shared->completed.store(event->completed, std::memory_order_release);
    event->ipc = shared;
    event->ipc_fd = fd;
  }
  FAKECUDA_REQUIRE(event->ipc_fd >= 0, CUDA_ERROR_INVALID_HANDLE);
  struct stat st {};
  FAKECUDA_REQUIRE(fstat(event->ipc_fd, &st) == 0, CUDA_ERROR_MAP_FAILED);
  EventHandle h{};
  h.magic = kEventHandleMagic;
  h.pid = getpid();
  h.fd = event->ipc_fd;
  h.inode = st.st_ino;
  h.fs_device = st.st_dev;
  std::memcpy(pHandle->reserved, &h, sizeof h);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuIpcOpenEventHandle(CUevent* phEvent, CUipcEventHandle handle) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(phEvent, CUDA_ERROR_INVALID_VALUE);
  EventHandle h;
  std::memcpy(&h, handle.reserved, sizeof h);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(h.magic == kEventHandleMagic, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(h.pid != getpid(), CUDA_ERROR_INVALID_CONTEXT);
  const int fd = open_exported(h.pid, h.fd, h.inode, h.fs_device);
  FAKECUDA_REQUIRE(fd >= 0, CUDA_ERROR_INVALID_HANDLE);
  void* page = mmap(nullptr, kEventPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  FAKECUDA_REQUIRE(page != MAP_FAILED, CUDA_ERROR_MAP_FAILED);
  auto* e = new CUevent_st{};
  e->magic = kEventMagic;
  e->ctx = ctx;
  e->flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  e->ipc = static_cast<IpcEventPage*>(page);
  e->ipc_fd = -1;
  e->recorded = e->ipc->recorded.load(std::memory_order_acquire);
  d.live.insert(e);
  *phEvent = e;
  return CUDA_SUCCESS;
}
