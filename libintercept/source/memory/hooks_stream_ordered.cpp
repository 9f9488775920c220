// Stream-ordered allocation (cuMemAllocAsync, from pools; PyTorch's
// cudaMallocAsync backend, cuBLAS workspaces). Charged at the call like a
// linear allocation, on the current context's device, and given back when
// cuMemFreeAsync is called. Not counted: memory a pool keeps reserved after
// its allocations are freed (with the default release threshold of 0 the
// pool gives it back at the next synchronisation). Allocations made while the
// stream is being captured pass here uncounted: they become allocation nodes
// of the captured graph, charged when it is instantiated (hooks_graphs.cpp).
#include <utility>

#include "memory/accounting.h"

namespace {

using gpulimit::Tenant;

template <typename IsCapturing>
bool capturing(CUstream stream, IsCapturing& is_capturing) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  auto fn = gpulimit::real_function(is_capturing);
  return fn && fn(stream, &status) == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

template <typename Real, typename IsCapturing, typename FreeAsync, typename... Pool>
CUresult allocate_async(Real real, IsCapturing& is_capturing, FreeAsync& free_async,
                        CUdeviceptr* dptr, size_t bytes, CUstream stream, Pool... pool) {
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!dptr || bytes == 0 || !tenant || capturing(stream, is_capturing))
    return real(dptr, bytes, pool..., stream);
  return gpulimit::charged<false>(
      tenant, gpulimit::current_device(tenant), bytes,
      [&](uint64_t* key) {
        CUresult r = real(dptr, bytes, pool..., stream);
        *key = *dptr;
        return r;
      },
      [&](uint64_t key) { gpulimit::real_function(free_async)(key, stream); });
}

template <typename Real>
CUresult free_async(Real real, CUdeviceptr dptr, CUstream stream) {
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return gpulimit::uncharged<false>(dptr, [&] { return real(dptr, stream); });
}

}  // namespace

using namespace gpulimit;

GPULIMIT_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return allocate_async(real_function(real::cuMemAllocAsync), real::cuStreamIsCapturing,
                        real::cuMemFreeAsync, dptr, bytes, stream);
}

GPULIMIT_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return allocate_async(real_function(real::cuMemAllocAsync_ptsz), real::cuStreamIsCapturing_ptsz,
                        real::cuMemFreeAsync_ptsz, dptr, bytes, stream);
}

GPULIMIT_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                                 CUstream stream) {
  return allocate_async(real_function(real::cuMemAllocFromPoolAsync), real::cuStreamIsCapturing,
                        real::cuMemFreeAsync, dptr, bytes, stream, pool);
}

GPULIMIT_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                      CUmemoryPool pool, CUstream stream) {
  return allocate_async(real_function(real::cuMemAllocFromPoolAsync_ptsz),
                        real::cuStreamIsCapturing_ptsz, real::cuMemFreeAsync_ptsz, dptr, bytes,
                        stream, pool);
}

GPULIMIT_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  return free_async(real_function(real::cuMemFreeAsync), dptr, stream);
}

GPULIMIT_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  return free_async(real_function(real::cuMemFreeAsync_ptsz), dptr, stream);
}
