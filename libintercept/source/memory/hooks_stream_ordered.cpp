// Stream-ordered allocation (cuMemAllocAsync, from pools; PyTorch's
// cudaMallocAsync backend, cuBLAS workspaces) and the pools it comes from.
// Charged at the call on the device the memory lands on, which need not be
// the current context's: cuMemAllocAsync allocates from the current pool of
// the stream's device, cuMemAllocFromPoolAsync from the pool's device.
// pool_books.h keeps what each pool holds charged, its reserve beyond its
// allocations included. Allocations made while the stream is being captured
// pass here uncounted: they become allocation nodes of the captured graph,
// charged when it is instantiated (hooks_graphs.cpp).
#include "memory/accounting.h"
#include "memory/graph_books.h"
#include "memory/pool_books.h"

namespace {

using gpulimit::Tenant;
namespace real = gpulimit::real;
using gpulimit::real_function;

// The stream's entry points of one default-stream mode (legacy or per-thread).
struct StreamCalls {
  std::atomic<PFN_cuStreamIsCapturing_v10000>& is_capturing;
  std::atomic<PFN_cuStreamGetDevice_v12080>& get_device;
  std::atomic<PFN_cuStreamGetCtx_v9020>& get_ctx;
  std::atomic<PFN_cuMemFreeAsync_v11020>& free_async;
};

const StreamCalls kLegacy{real::cuStreamIsCapturing, real::cuStreamGetDevice, real::cuStreamGetCtx,
                          real::cuMemFreeAsync};
const StreamCalls kPerThread{real::cuStreamIsCapturing_ptsz, real::cuStreamGetDevice_ptsz,
                             real::cuStreamGetCtx_ptsz, real::cuMemFreeAsync_ptsz};

bool capturing(CUstream stream, const StreamCalls& calls) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  auto fn = real_function(calls.is_capturing);
  return fn && fn(stream, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// The device of `stream` (of the current context for the default streams):
// cuStreamGetDevice where the driver has it (12.8), else the device of the
// stream's context. -1 when the driver cannot say (an invalid stream: the
// allocation then fails in the driver).
CUdevice stream_device(CUstream stream, const StreamCalls& calls) {
  CUdevice device = -1;
  if (auto get_device = real_function(calls.get_device))
    return get_device(stream, &device) == CUDA_SUCCESS ? device : -1;
  auto get_ctx = real_function(calls.get_ctx);
  auto push = real_function(real::cuCtxPushCurrent_v2);
  auto pop = real_function(real::cuCtxPopCurrent_v2);
  auto ctx_device = real_function(real::cuCtxGetDevice);
  CUcontext ctx = nullptr;
  if (!get_ctx || !push || !pop || !ctx_device || get_ctx(stream, &ctx) != CUDA_SUCCESS || !ctx)
    return -1;
  if (push(ctx) != CUDA_SUCCESS) return -1;
  if (ctx_device(&device) != CUDA_SUCCESS) device = -1;
  CUcontext popped = nullptr;
  pop(&popped);
  return device;
}

// `pool` is the pool to allocate from, or nullptr for the current pool of the
// stream's device (cuMemAllocAsync).
template <typename Allocate>
CUresult allocate_async(const StreamCalls& calls, CUdeviceptr* dptr, size_t bytes, CUstream stream,
                        CUmemoryPool pool, Allocate&& real_allocate) {
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || bytes == 0 || !tenant || capturing(stream, calls)) return real_allocate();
  namespace books = gpulimit::pool_books;
  CUdevice ordinal = -1;
  if (pool) {
    ordinal = books::pool_device(pool);
    if (ordinal == books::kNotDevice) return real_allocate();  // host memory
  } else {
    ordinal = stream_device(stream, calls);
    auto current_pool = real_function(real::cuDeviceGetMemPool);
    if (ordinal < 0 || !current_pool || current_pool(&pool, ordinal) != CUDA_SUCCESS)
      pool = nullptr;
  }
  auto undo = [&](CUdeviceptr p) { real_function(calls.free_async)(p, stream); };
  if (pool && ordinal >= 0 && books::pool_device(pool) == ordinal) {
    if (tenant->ledger_device(ordinal) < 0) return real_allocate();
    return books::allocate(
        tenant, pool, ordinal, bytes,
        [&](CUdeviceptr* out) {
          const CUresult r = real_allocate();
          *out = *dptr;
          return r;
        },
        undo);
  }
  // A pool the books do not know (not created through the hooks, nor a
  // device's): charged as an allocation on the stream's device.
  if (ordinal < 0) ordinal = stream_device(stream, calls);
  return gpulimit::charged<false>(
      tenant, ordinal >= 0 ? tenant->ledger_device(ordinal) : gpulimit::current_device(tenant),
      bytes,
      [&](uint64_t* key) {
        const CUresult r = real_allocate();
        *key = *dptr;
        return r;
      },
      undo);
}

// Freeing a graph allocation outside a graph tells the graph books; freeing
// one on a capturing stream only adds a free node to the captured graph.
template <typename Real>
CUresult free_async(const StreamCalls& calls, Real real, CUdeviceptr dptr, CUstream stream) {
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (Tenant::limited() && gpulimit::pool_books::owns(dptr))
    return gpulimit::pool_books::free(dptr, [&] { return real(dptr, stream); });
  const CUresult result = gpulimit::uncharged<false>(dptr, [&] { return real(dptr, stream); });
  if (result == CUDA_SUCCESS && gpulimit::graph_books::tracks_allocations() &&
      !capturing(stream, calls))
    gpulimit::graph_books::freed(dptr);
  return result;
}

}  // namespace

using namespace gpulimit;

GPULIMIT_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  auto real = real_function(real::cuMemAllocAsync);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return allocate_async(kLegacy, dptr, bytes, stream, nullptr,
                        [&] { return real(dptr, bytes, stream); });
}

GPULIMIT_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  auto real = real_function(real::cuMemAllocAsync_ptsz);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return allocate_async(kPerThread, dptr, bytes, stream, nullptr,
                        [&] { return real(dptr, bytes, stream); });
}

GPULIMIT_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                                 CUstream stream) {
  auto real = real_function(real::cuMemAllocFromPoolAsync);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (!pool) return real(dptr, bytes, pool, stream);  // the driver's own error
  return allocate_async(kLegacy, dptr, bytes, stream, pool,
                        [&] { return real(dptr, bytes, pool, stream); });
}

GPULIMIT_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                      CUmemoryPool pool, CUstream stream) {
  auto real = real_function(real::cuMemAllocFromPoolAsync_ptsz);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (!pool) return real(dptr, bytes, pool, stream);
  return allocate_async(kPerThread, dptr, bytes, stream, pool,
                        [&] { return real(dptr, bytes, pool, stream); });
}

GPULIMIT_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  return free_async(kLegacy, real_function(real::cuMemFreeAsync), dptr, stream);
}

GPULIMIT_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  return free_async(kPerThread, real_function(real::cuMemFreeAsync_ptsz), dptr, stream);
}

GPULIMIT_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  auto real = real_function(real::cuMemPoolCreate);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  const CUresult result = real(pool, props);
  if (result == CUDA_SUCCESS && Tenant::limited()) pool_books::created(*pool, props);
  return result;
}

GPULIMIT_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  auto real = real_function(real::cuMemPoolDestroy);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  if (!Tenant::limited()) return real(pool);
  pool_books::Lock held;
  const CUresult result = real(pool);
  if (result == CUDA_SUCCESS) pool_books::destroyed(pool);
  return result;
}

GPULIMIT_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  auto real = real_function(real::cuMemPoolTrimTo);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  const CUresult result = real(pool, keep);
  if (result == CUDA_SUCCESS && Tenant::limited()) pool_books::trimmed(pool);
  return result;
}
