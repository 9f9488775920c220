// cuGetProcAddress: since CUDA 11.3 the runtime (and so PyTorch, cuBLAS,
// NCCL) obtains every driver function through it. The real lookup runs first
// with the caller's exact arguments; a function gpulimit hooks is then
// answered with our hook of the same variant.
#include <cstring>

#include "lookup/hook_table.h"
#include "lookup/real_driver.h"

GPULIMIT_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                             cuuint64_t flags,
                                             CUdriverProcAddressQueryResult* symbolStatus) {
  auto real = gpulimit::real_function(gpulimit::real::cuGetProcAddress_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  CUresult result = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (result == CUDA_SUCCESS && pfn && *pfn)
    *pfn = gpulimit::hook_for_proc_address(symbol, *pfn, cudaVersion, flags);
  return result;
}

GPULIMIT_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                          cuuint64_t flags) {
  auto real = gpulimit::real_function(gpulimit::real::cuGetProcAddress);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  CUresult result = real(symbol, pfn, cudaVersion, flags);
  if (result == CUDA_SUCCESS && pfn && *pfn)
    *pfn = gpulimit::hook_for_proc_address(symbol, *pfn, cudaVersion, flags);
  return result;
}
