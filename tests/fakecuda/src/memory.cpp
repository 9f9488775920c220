// Linear, managed and host memory, copies and fills, and the memory queries.
// Device memory is host address space that reads as zero until written; it
// is charged to the machine-wide pool in 2 MiB pages.
#include "memory.h"

#include <sys/mman.h>

#include <cstring>

#include "context.h"
#include "executor.h"
#include "graph.h"
#include "stream.h"

using namespace fakecuda;

namespace fakecuda {

CUresult allocate_device(size_t bytes, AllocationKind kind, bool low_32bit, uintptr_t* out) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(bytes > 0, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  if (CUresult r = capture_forbids_unsafe_call_locked(); r != CUDA_SUCCESS) return r;
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  const uint64_t charge = round_up(bytes, kPageSize);
  if (!d.shared().charge(ctx->physical, charge)) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t mapped = round_up(bytes, 4096);
  void* base = nullptr;
  if (low_32bit) {
    base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_32BIT, -1, 0);
    if (base == MAP_FAILED) base = nullptr;
  } else {
    base = map_device_memory(mapped);
  }
  if (!base) {
    d.shared().uncharge(ctx->physical, charge);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(base);
  a.size = bytes;
  a.mapped = mapped;
  a.charged = charge;
  a.physical = ctx->physical;
  a.ordinal = ctx->ordinal;
  a.kind = kind;
  a.ctx = ctx;
  d.allocations[a.base] = a;
  *out = a.base;
  return CUDA_SUCCESS;
}

CUresult free_device(uintptr_t ptr) {
  FAKECUDA_REQUIRE_INIT();
  // Freeing NULL is a no-op that succeeds, as with the real driver
  // (cudaFree(NULL), which cuBLAS calls at cublasCreate).
  if (ptr == 0) return CUDA_SUCCESS;
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  if (CUresult r = capture_forbids_unsafe_call_locked(); r != CUDA_SUCCESS) return r;
  auto it = d.allocations.find(ptr);
  if (it == d.allocations.end() && graph_address_locked(ptr)) {
    // A graph allocation whose launch is queued and has not reached its
    // allocation node: cuMemFree synchronises first.
    d.executor().wait_device_idle(lock, -1);
    it = d.allocations.find(ptr);
  }
  FAKECUDA_REQUIRE(it != d.allocations.end(), CUDA_ERROR_INVALID_VALUE);
  const AllocationKind kind = it->second.kind;
  FAKECUDA_REQUIRE(kind != AllocationKind::kHost && kind != AllocationKind::kMapped &&
                       kind != AllocationKind::kIpc && kind != AllocationKind::kModule,
                   CUDA_ERROR_INVALID_VALUE);
  // cuMemFree synchronises: work still queued may use the memory. Graph
  // memory belongs to its device's graph pool, not to a context: every
  // context on the device is waited for.
  if (CUctx_st* ctx = it->second.ctx)
    d.executor().wait_context_idle(lock, ctx);
  else
    d.executor().wait_device_idle(lock, it->second.ordinal);
  it = d.allocations.find(ptr);
  FAKECUDA_REQUIRE(it != d.allocations.end(), CUDA_ERROR_INVALID_VALUE);
  release_allocation_locked(it->second);
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

namespace {

CUresult copy(DefaultStream mode, CUstream stream, bool sync, void* dst, const void* src,
              size_t bytes) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  if (bytes == 0) return CUDA_SUCCESS;
  FAKECUDA_REQUIRE(dst && src, CUDA_ERROR_INVALID_VALUE);
  Op op = action_op([dst, src, bytes](uint64_t) { std::memmove(dst, src, bytes); });
  if (sync) return submit_and_wait(lock, mode, std::move(op));
  return submit_locked(stream, mode, std::move(op));
}

template <typename T>
CUresult fill(DefaultStream mode, CUstream stream, bool sync, CUdeviceptr dst, size_t pitch,
              T value, size_t width, size_t height) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  FAKECUDA_REQUIRE(dst && dst % sizeof(T) == 0, CUDA_ERROR_INVALID_VALUE);
  if (height == 1) pitch = width * sizeof(T);
  FAKECUDA_REQUIRE(pitch >= width * sizeof(T), CUDA_ERROR_INVALID_VALUE);
  const Allocation* a = find_allocation(dst);
  FAKECUDA_REQUIRE(a && dst + pitch * (height - 1) + width * sizeof(T) <= a->base + a->size,
                   CUDA_ERROR_INVALID_VALUE);
  Op op = action_op([dst, pitch, value, width, height](uint64_t) {
    for (size_t row = 0; row < height; ++row) {
      T* p = reinterpret_cast<T*>(dst + row * pitch);
      for (size_t i = 0; i < width; ++i)
        p[i] = value;
    }
  });
  if (sync) return submit_and_wait(lock, mode, std::move(op));
  return submit_locked(stream, mode, std::move(op));
}

void* host_ptr(CUdeviceptr p) {
  return reinterpret_cast<void*>(p);
}

}  // namespace

namespace fakecuda {

void release_allocation_locked(const Allocation& allocation) {
  Driver& d = Driver::get();
  const Allocation a = allocation;  // the map entry goes away below
  d.allocations.erase(a.base);
  switch (a.kind) {
    case AllocationKind::kPool:
      return_to_pool_locked(a);
      break;
    case AllocationKind::kGraph:
      return_to_graph_pool_locked(a);
      break;
    default:
      if (const uint64_t bytes = release_ipc_locked(a)) d.shared().uncharge(a.physical, bytes);
      break;
  }
  if (a.mapped) unmap_device_memory(host_ptr(a.base), a.mapped);
}

}  // namespace fakecuda

// ---- Allocation -------------------------------------------------------------------

FAKECUDA_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(dptr, CUDA_ERROR_INVALID_VALUE);
  uintptr_t p = 0;
  CUresult r = allocate_device(bytesize, AllocationKind::kLinear, false, &p);
  if (r == CUDA_SUCCESS) *dptr = p;
  return r;
}

FAKECUDA_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                            size_t Height, unsigned int ElementSizeBytes) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(dptr && pPitch, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(ElementSizeBytes == 4 || ElementSizeBytes == 8 || ElementSizeBytes == 16,
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(WidthInBytes > 0 && Height > 0, CUDA_ERROR_INVALID_VALUE);
  const size_t pitch = round_up(WidthInBytes, 512);  // CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT
  uintptr_t p = 0;
  CUresult r = allocate_device(pitch * Height, AllocationKind::kLinear, false, &p);
  if (r == CUDA_SUCCESS) {
    *dptr = p;
    *pPitch = pitch;
  }
  return r;
}

FAKECUDA_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(dptr, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(flags == CU_MEM_ATTACH_GLOBAL || flags == CU_MEM_ATTACH_HOST,
                   CUDA_ERROR_INVALID_VALUE);
  // Charged to the device at allocation: the simulator does not migrate pages.
  uintptr_t p = 0;
  CUresult r = allocate_device(bytesize, AllocationKind::kManaged, false, &p);
  if (r == CUDA_SUCCESS) *dptr = p;
  return r;
}

FAKECUDA_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  return free_device(dptr);
}

FAKECUDA_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(free && total, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  CUctx_st* ctx = nullptr;
  uint32_t physical = 0;
  {
    std::lock_guard<std::mutex> guard(d.mu);
    if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
    physical = ctx->physical;
  }
  const uint64_t capacity = d.device(ctx->ordinal).config->total_mem;
  const uint64_t used = d.shared().used(physical);
  *total = capacity;
  *free = used >= capacity ? 0 : capacity - used;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize,
                                                 CUdeviceptr dptr) {
  FAKECUDA_REQUIRE_INIT();
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  const Allocation* a = find_allocation(dptr);
  FAKECUDA_REQUIRE(a && a->kind != AllocationKind::kHost, CUDA_ERROR_NOT_FOUND);
  if (pbase) *pbase = a->base;
  if (psize) *psize = a->size;
  return CUDA_SUCCESS;
}

// ---- Page-locked host memory ---------------------------------------------------------

FAKECUDA_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pp && bytesize > 0, CUDA_ERROR_INVALID_VALUE);
  constexpr unsigned kKnown =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  FAKECUDA_REQUIRE((Flags & ~kKnown) == 0, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  const size_t mapped = round_up(bytesize, 4096);
  void* base = map_device_memory(mapped);
  FAKECUDA_REQUIRE(base, CUDA_ERROR_OUT_OF_MEMORY);
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(base);
  a.size = bytesize;
  a.mapped = mapped;
  a.kind = AllocationKind::kHost;
  a.host_flags = Flags;
  a.ctx = ctx;
  a.physical = ctx->physical;
  a.ordinal = ctx->ordinal;
  d.allocations[a.base] = a;
  *pp = base;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  return cuMemHostAlloc(pp, bytesize, 0);
}

FAKECUDA_EXPORT CUresult cuMemFreeHost(void* p) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  auto it = d.allocations.find(reinterpret_cast<uintptr_t>(p));
  FAKECUDA_REQUIRE(
      it != d.allocations.end() && it->second.kind == AllocationKind::kHost && it->second.mapped,
      CUDA_ERROR_INVALID_VALUE);
  release_allocation_locked(it->second);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                      unsigned int Flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pdptr && Flags == 0, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  const Allocation* a = find_allocation(reinterpret_cast<uintptr_t>(p));
  FAKECUDA_REQUIRE(a && a->kind == AllocationKind::kHost, CUDA_ERROR_INVALID_VALUE);
  *pdptr = reinterpret_cast<uintptr_t>(p);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(p && bytesize > 0, CUDA_ERROR_INVALID_VALUE);
  constexpr unsigned kKnown = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                              CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  FAKECUDA_REQUIRE((Flags & ~kKnown) == 0, CUDA_ERROR_INVALID_VALUE);
  // CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED is 0, and there is
  // no I/O memory to register.
  FAKECUDA_REQUIRE(!(Flags & (CU_MEMHOSTREGISTER_READ_ONLY | CU_MEMHOSTREGISTER_IOMEMORY)),
                   CUDA_ERROR_NOT_SUPPORTED);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  const uintptr_t base = reinterpret_cast<uintptr_t>(p);
  // No byte of the range may be registered already.
  auto next = d.allocations.lower_bound(base);
  FAKECUDA_REQUIRE(
      !find_allocation(base) && (next == d.allocations.end() || next->first >= base + bytesize),
      CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  Allocation a;
  a.base = base;
  a.size = bytesize;
  a.host_flags = Flags;
  a.kind = AllocationKind::kHost;
  a.ctx = ctx;
  a.physical = ctx->physical;
  a.ordinal = ctx->ordinal;
  d.allocations[base] = a;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemHostGetFlags(unsigned int* pFlags, void* p) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pFlags, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  // Only memory of cuMemHostAlloc and cuMemAllocHost (which the driver
  // allocated: `mapped`), not registered memory.
  const Allocation* a = find_allocation(reinterpret_cast<uintptr_t>(p));
  FAKECUDA_REQUIRE(a && a->kind == AllocationKind::kHost && a->mapped, CUDA_ERROR_INVALID_VALUE);
  *pFlags = a->host_flags;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemHostUnregister(void* p) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  auto it = d.allocations.find(reinterpret_cast<uintptr_t>(p));
  FAKECUDA_REQUIRE(
      it != d.allocations.end() && it->second.kind == AllocationKind::kHost && !it->second.mapped,
      CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  d.allocations.erase(it);
  return CUDA_SUCCESS;
}

// ---- Copies and fills ----------------------------------------------------------------
// Synchronous forms are ordered in the default stream (legacy, or the
// per-thread one for _ptds) and return when done; async forms take a stream.

#define FAKECUDA_COPY_FAMILY(name, dst_t, src_t, to_dst, to_src)                        \
  FAKECUDA_EXPORT CUresult name(dst_t dst, src_t src, size_t n) {                       \
    return copy(DefaultStream::kLegacy, nullptr, true, to_dst(dst), to_src(src), n);    \
  }                                                                                     \
  FAKECUDA_EXPORT CUresult name##_ptds(dst_t dst, src_t src, size_t n) {                \
    return copy(DefaultStream::kPerThread, nullptr, true, to_dst(dst), to_src(src), n); \
  }

#define FAKECUDA_ASYNC_COPY_FAMILY(name, dst_t, src_t, to_dst, to_src)               \
  FAKECUDA_EXPORT CUresult name(dst_t dst, src_t src, size_t n, CUstream s) {        \
    return copy(DefaultStream::kLegacy, s, false, to_dst(dst), to_src(src), n);      \
  }                                                                                  \
  FAKECUDA_EXPORT CUresult name##_ptsz(dst_t dst, src_t src, size_t n, CUstream s) { \
    return copy(DefaultStream::kPerThread, s, false, to_dst(dst), to_src(src), n);   \
  }

namespace {
void* dev(CUdeviceptr p) {
  return reinterpret_cast<void*>(p);
}
const void* cdev(CUdeviceptr p) {
  return reinterpret_cast<const void*>(p);
}
void* host(void* p) {
  return p;
}
const void* chost(const void* p) {
  return p;
}
}  // namespace

FAKECUDA_COPY_FAMILY(cuMemcpy, CUdeviceptr, CUdeviceptr, dev, cdev)
FAKECUDA_COPY_FAMILY(cuMemcpyHtoD_v2, CUdeviceptr, const void*, dev, chost)
FAKECUDA_COPY_FAMILY(cuMemcpyDtoH_v2, void*, CUdeviceptr, host, cdev)
FAKECUDA_COPY_FAMILY(cuMemcpyDtoD_v2, CUdeviceptr, CUdeviceptr, dev, cdev)
FAKECUDA_ASYNC_COPY_FAMILY(cuMemcpyAsync, CUdeviceptr, CUdeviceptr, dev, cdev)
FAKECUDA_ASYNC_COPY_FAMILY(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void*, dev, chost)
FAKECUDA_ASYNC_COPY_FAMILY(cuMemcpyDtoHAsync_v2, void*, CUdeviceptr, host, cdev)
FAKECUDA_ASYNC_COPY_FAMILY(cuMemcpyDtoDAsync_v2, CUdeviceptr, CUdeviceptr, dev, cdev)

#define FAKECUDA_FILL_FAMILY(bits, T)                                                              \
  FAKECUDA_EXPORT CUresult cuMemsetD##bits##_v2(CUdeviceptr d, T v, size_t n) {                    \
    return fill<T>(DefaultStream::kLegacy, nullptr, true, d, 0, v, n, 1);                          \
  }                                                                                                \
  FAKECUDA_EXPORT CUresult cuMemsetD##bits##_v2_ptds(CUdeviceptr d, T v, size_t n) {               \
    return fill<T>(DefaultStream::kPerThread, nullptr, true, d, 0, v, n, 1);                       \
  }                                                                                                \
  FAKECUDA_EXPORT CUresult cuMemsetD##bits##Async(CUdeviceptr d, T v, size_t n, CUstream s) {      \
    return fill<T>(DefaultStream::kLegacy, s, false, d, 0, v, n, 1);                               \
  }                                                                                                \
  FAKECUDA_EXPORT CUresult cuMemsetD##bits##Async_ptsz(CUdeviceptr d, T v, size_t n, CUstream s) { \
    return fill<T>(DefaultStream::kPerThread, s, false, d, 0, v, n, 1);                            \
  }                                                                                                \
  FAKECUDA_EXPORT CUresult cuMemsetD2D##bits##_v2(CUdeviceptr d, size_t pitch, T v, size_t w,      \
                                                  size_t h) {                                      \
    return fill<T>(DefaultStream::kLegacy, nullptr, true, d, pitch, v, w, h);                      \
  }                                                                                                \
  FAKECUDA_EXPORT CUresult cuMemsetD2D##bits##_v2_ptds(CUdeviceptr d, size_t pitch, T v, size_t w, \
                                                       size_t h) {                                 \
    return fill<T>(DefaultStream::kPerThread, nullptr, true, d, pitch, v, w, h);                   \
  }                                                                                                \
  FAKECUDA_EXPORT CUresult cuMemsetD2D##bits##Async(CUdeviceptr d, size_t pitch, T v, size_t w,    \
                                                    size_t h, CUstream s) {                        \
    return fill<T>(DefaultStream::kLegacy, s, false, d, pitch, v, w, h);                           \
  }                                                                                                \
  FAKECUDA_EXPORT CUresult cuMemsetD2D##bits##Async_ptsz(CUdeviceptr d, size_t pitch, T v,         \
                                                         size_t w, size_t h, CUstream s) {         \
    return fill<T>(DefaultStream::kPerThread, s, false, d, pitch, v, w, h);                        \
  }

FAKECUDA_FILL_FAMILY(8, unsigned char)
FAKECUDA_FILL_FAMILY(16, unsigned short)
FAKECUDA_FILL_FAMILY(32, unsigned int)
