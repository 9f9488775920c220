// A libcuda.so.1 with almost nothing in it: cuInit, cuGetErrorName and the
// two cuGetProcAddress forms, which know only those. Every workload must stop
// on it with one line naming the first function it lacks, whichever access
// path it takes, and never call through a null pointer.
#include <cuda.h>

#include <cstring>

namespace {

struct Export {
  const char* name;
  void* address;
};

}  // namespace

extern "C" {

CUresult cuInit(unsigned int) {
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult, const char** name) {
  *name = "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status);

// The four-argument form, which cuda.h declares only for the driver itself.
CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  CUdriverProcAddressQueryResult ignored;
  return cuGetProcAddress_v2(symbol, pfn, version, flags, &ignored);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t,
                             CUdriverProcAddressQueryResult* status) {
  const Export exports[] = {
      {"cuInit", reinterpret_cast<void*>(&cuInit)},
      {"cuGetErrorName", reinterpret_cast<void*>(&cuGetErrorName)},
      {"cuGetProcAddress", version >= 12000 ? reinterpret_cast<void*>(&cuGetProcAddress_v2)
                                            : reinterpret_cast<void*>(&cuGetProcAddress)},
  };
  *pfn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  for (const Export& entry : exports) {
    if (std::strcmp(entry.name, symbol) == 0) {
      *pfn = entry.address;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    }
  }
  return CUDA_SUCCESS;
}

}  // extern "C"
