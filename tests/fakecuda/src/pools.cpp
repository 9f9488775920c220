// Stream-ordered allocation and memory pools. A pool holds device memory
// (charged to the device in 2 MiB pages) and hands it out; freed memory stays
// in the pool until a synchronisation finds the pool above its release
// threshold, or the pool is trimmed.
#include <algorithm>

#include "context.h"
#include "graph.h"
#include "memory.h"
#include "stream.h"

using namespace fakecuda;

namespace {

CUmemPoolHandle_st* new_pool(int ordinal, bool is_default) {
  Driver& d = Driver::get();
  auto* pool = new CUmemPoolHandle_st{};
  pool->magic = kPoolMagic;
  pool->ordinal = ordinal;
  pool->physical = d.device(ordinal).physical;
  pool->is_default = is_default;
  d.live.insert(pool);
  return pool;
}

CUmemPoolHandle_st* default_pool_locked(int ordinal) {
  Driver& d = Driver::get();
  CUmemPoolHandle_st*& pool = d.default_pool[static_cast<size_t>(ordinal)];
  if (!pool) pool = new_pool(ordinal, true);
  return pool;
}

CUmemPoolHandle_st* current_pool_locked(int ordinal) {
  Driver& d = Driver::get();
  CUmemoryPool pool = d.current_pool[static_cast<size_t>(ordinal)];
  return pool ? pool : default_pool_locked(ordinal);
}

// Gives the pool's unused pages above `keep` back to the device.
void shrink(CUmemPoolHandle_st* pool, uint64_t keep) {
  // A threshold at or above what is reserved keeps it all; UINT64_MAX ("never
  // release", as PyTorch's cudaMallocAsync backend sets it) would overflow
  // the round-up below.
  if (keep >= pool->reserved) return;
  const uint64_t floor = round_up(std::max(pool->used, keep), kPageSize);
  if (pool->reserved <= floor) return;
  Driver::get().shared().uncharge(pool->physical, pool->reserved - floor);
  pool->reserved = floor;
}

CUresult alloc_from_pool(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream handle,
                         DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(dptr && bytes > 0, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  if (!pool) pool = current_pool_locked(s->ctx->ordinal);
  FAKECUDA_REQUIRE(d.is_live(pool, kPoolMagic), CUDA_ERROR_INVALID_VALUE);
  if (s->capture) return capture_mem_alloc_locked(s, bytes, dptr);
  if (pool->used + bytes > pool->reserved) {
    const uint64_t grow = round_up(pool->used + bytes - pool->reserved, kPageSize);
    if (!d.shared().charge(pool->physical, grow)) return CUDA_ERROR_OUT_OF_MEMORY;
    pool->reserved += grow;
    pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
  }
  const size_t mapped = round_up(bytes, 4096);
  void* base = map_device_memory(mapped);
  if (!base) return CUDA_ERROR_OUT_OF_MEMORY;
  pool->used += bytes;
  pool->used_high = std::max(pool->used_high, pool->used);
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(base);
  a.size = bytes;
  a.mapped = mapped;
  a.physical = pool->physical;
  a.ordinal = pool->ordinal;
  a.kind = AllocationKind::kPool;
  a.ctx = s->ctx;
  a.pool = pool;
  d.allocations[a.base] = a;
  *dptr = a.base;
  return CUDA_SUCCESS;
}

CUresult free_async(CUdeviceptr dptr, CUstream handle, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  if (s->capture) return capture_mem_free_locked(s, dptr);
  auto it = d.allocations.find(dptr);
  FAKECUDA_REQUIRE(it != d.allocations.end(), CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(it->second.kind != AllocationKind::kHost &&
                       it->second.kind != AllocationKind::kMapped &&
                       it->second.kind != AllocationKind::kModule,
                   CUDA_ERROR_INVALID_VALUE);
  // The pointer is dead to new calls at once; its memory returns to the pool
  // when the stream reaches the free.
  const Allocation a = it->second;
  d.allocations.erase(it);
  Op op = action_op([a](uint64_t) {
    Driver& driver = Driver::get();
    driver.allocations[a.base] = a;  // release_allocation_locked expects it registered
    release_allocation_locked(a);
  });
  return submit_locked(s, mode, std::move(op));
}

}  // namespace

namespace fakecuda {

void return_to_pool_locked(const Allocation& a) {
  Driver& d = Driver::get();
  CUmemPoolHandle_st* pool = a.pool;
  pool->used -= a.size;
  if (!d.is_live(pool, kPoolMagic) && pool->used == 0) {
    // Destroyed while allocations were out: released with the last one.
    d.shared().uncharge(pool->physical, pool->reserved);
    delete pool;
  }
}

void trim_pools_after_sync_locked(uint32_t physical) {
  Driver& d = Driver::get();
  for (const void* handle : d.live) {
    if (*static_cast<const uint32_t*>(handle) != kPoolMagic) continue;
    auto* pool = const_cast<CUmemPoolHandle_st*>(static_cast<const CUmemPoolHandle_st*>(handle));
    if (pool->physical == physical) shrink(pool, pool->release_threshold);
  }
}

}  // namespace fakecuda

FAKECUDA_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return alloc_from_pool(dptr, bytesize, nullptr, hStream, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                              CUstream hStream) {
  return alloc_from_pool(dptr, bytesize, nullptr, hStream, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize,
                                                 CUmemoryPool pool, CUstream hStream) {
  FAKECUDA_REQUIRE(pool, CUDA_ERROR_INVALID_VALUE);
  return alloc_from_pool(dptr, bytesize, pool, hStream, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize,
                                                      CUmemoryPool pool, CUstream hStream) {
  FAKECUDA_REQUIRE(pool, CUDA_ERROR_INVALID_VALUE);
  return alloc_from_pool(dptr, bytesize, pool, hStream, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return free_async(dptr, hStream, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return free_async(dptr, hStream, DefaultStream::kPerThread);
}

FAKECUDA_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pool && props, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(props->allocType == CU_MEM_ALLOCATION_TYPE_PINNED &&
                       props->location.type == CU_MEM_LOCATION_TYPE_DEVICE,
                   CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(props->location.id), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  *pool = new_pool(props->location.id, false);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(pool, kPoolMagic) && !pool->is_default, CUDA_ERROR_INVALID_VALUE);
  d.live.erase(pool);
  for (auto& current : d.current_pool)
    if (current == pool) current = nullptr;
  if (pool->used == 0) {
    d.shared().uncharge(pool->physical, pool->reserved);
    delete pool;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(pool, kPoolMagic), CUDA_ERROR_INVALID_VALUE);
  shrink(pool, minBytesToKeep);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                               void* value) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(value, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(pool, kPoolMagic), CUDA_ERROR_INVALID_VALUE);
  const uint64_t v64 = *static_cast<const cuuint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      pool->release_threshold = v64;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      FAKECUDA_REQUIRE(v64 == 0, CUDA_ERROR_INVALID_VALUE);  // may only be reset
      pool->reserved_high = pool->reserved;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      FAKECUDA_REQUIRE(v64 == 0, CUDA_ERROR_INVALID_VALUE);
      pool->used_high = pool->used;
      break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      break;  // reuse policy: no effect on what the simulator accounts
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                               void* value) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(value, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(pool, kPoolMagic), CUDA_ERROR_INVALID_VALUE);
  auto* out = static_cast<cuuint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *out = pool->release_threshold;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      *out = pool->reserved;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *out = pool->reserved_high;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *out = pool->used;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *out = pool->used_high;
      break;
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *static_cast<int*>(value) = 1;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pool_out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  *pool_out = default_pool_locked(dev);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pool, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  *pool = current_pool_locked(dev);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  FAKECUDA_REQUIRE(d.valid_device(dev), CUDA_ERROR_INVALID_DEVICE);
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(pool, kPoolMagic) && pool->ordinal == dev, CUDA_ERROR_INVALID_VALUE);
  d.current_pool[static_cast<size_t>(dev)] = pool;
  return CUDA_SUCCESS;
}
