// The CUDA 2.0 ABI (cuGetProcAddress versions below 3020): 32-bit device
// pointers and sizes. Pointers are served from the low 2 GiB of the address
// space; sizes and counts that do not fit 32 bits saturate. Each entry point
// forwards to its current variant, bound inside this library
// (-Bsymbolic-functions), so an interposer sees one call, not two.
#include <climits>

#include "memory.h"

using namespace fakecuda;

namespace {

unsigned int saturate(size_t value) {
  return value > UINT_MAX ? UINT_MAX : static_cast<unsigned int>(value);
}

CUdeviceptr widen(CUdeviceptr_v1 p) {
  return p;
}

CUDA_ARRAY3D_DESCRIPTOR from_v1(const CUDA_ARRAY3D_DESCRIPTOR_v1& d) {
  CUDA_ARRAY3D_DESCRIPTOR out{};
  out.Width = d.Width;
  out.Height = d.Height;
  out.Depth = d.Depth;
  out.Format = d.Format;
  out.NumChannels = d.NumChannels;
  out.Flags = d.Flags;
  return out;
}

}  // namespace

FAKECUDA_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(dptr, CUDA_ERROR_INVALID_VALUE);
  uintptr_t p = 0;
  CUresult r = allocate_device(bytesize, AllocationKind::kLinear, true, &p);
  if (r == CUDA_SUCCESS) *dptr = static_cast<CUdeviceptr_v1>(p);
  return r;
}

FAKECUDA_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pPitch,
                                         unsigned int WidthInBytes, unsigned int Height,
                                         unsigned int ElementSizeBytes) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(dptr && pPitch, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(ElementSizeBytes == 4 || ElementSizeBytes == 8 || ElementSizeBytes == 16,
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(WidthInBytes > 0 && Height > 0, CUDA_ERROR_INVALID_VALUE);
  const size_t pitch = round_up(WidthInBytes, 512);
  uintptr_t p = 0;
  CUresult r = allocate_device(pitch * Height, AllocationKind::kLinear, true, &p);
  if (r == CUDA_SUCCESS) {
    *dptr = static_cast<CUdeviceptr_v1>(p);
    *pPitch = saturate(pitch);
  }
  return r;
}

FAKECUDA_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  return free_device(dptr);
}

FAKECUDA_EXPORT CUresult cuMemGetInfo(unsigned int* free, unsigned int* total) {
  FAKECUDA_REQUIRE(free && total, CUDA_ERROR_INVALID_VALUE);
  size_t f = 0, t = 0;
  if (CUresult r = cuMemGetInfo_v2(&f, &t); r != CUDA_SUCCESS) return r;
  *free = saturate(f);
  *total = saturate(t);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  FAKECUDA_REQUIRE(bytes, CUDA_ERROR_INVALID_VALUE);
  size_t total = 0;
  if (CUresult r = cuDeviceTotalMem_v2(&total, dev); r != CUDA_SUCCESS) return r;
  *bytes = saturate(total);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr_v1* pbase, unsigned int* psize,
                                              CUdeviceptr_v1 dptr) {
  CUdeviceptr base = 0;
  size_t size = 0;
  if (CUresult r = cuMemGetAddressRange_v2(&base, &size, dptr); r != CUDA_SUCCESS) return r;
  if (pbase) *pbase = static_cast<CUdeviceptr_v1>(base);
  if (psize) *psize = saturate(size);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemAllocHost(void** pp, unsigned int bytesize) {
  return cuMemAllocHost_v2(pp, bytesize);
}

FAKECUDA_EXPORT CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1* pdptr, void* p,
                                                   unsigned int Flags) {
  FAKECUDA_REQUIRE(pdptr, CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr wide = 0;
  if (CUresult r = cuMemHostGetDevicePointer_v2(&wide, p, Flags); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(wide <= UINT_MAX, CUDA_ERROR_INVALID_VALUE);
  *pdptr = static_cast<CUdeviceptr_v1>(wide);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  return cuMemHostRegister_v2(p, bytesize, Flags);
}

FAKECUDA_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr_v1 dst, const void* src, unsigned int n) {
  return cuMemcpyHtoD_v2(widen(dst), src, n);
}
FAKECUDA_EXPORT CUresult cuMemcpyDtoH(void* dst, CUdeviceptr_v1 src, unsigned int n) {
  return cuMemcpyDtoH_v2(dst, widen(src), n);
}
FAKECUDA_EXPORT CUresult cuMemcpyDtoD(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n) {
  return cuMemcpyDtoD_v2(widen(dst), widen(src), n);
}
FAKECUDA_EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dst, const void* src, unsigned int n,
                                           CUstream s) {
  return cuMemcpyHtoDAsync_v2(widen(dst), src, n, s);
}
FAKECUDA_EXPORT CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr_v1 src, unsigned int n,
                                           CUstream s) {
  return cuMemcpyDtoHAsync_v2(dst, widen(src), n, s);
}
FAKECUDA_EXPORT CUresult cuMemcpyDtoDAsync(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n,
                                           CUstream s) {
  return cuMemcpyDtoDAsync_v2(widen(dst), widen(src), n, s);
}

FAKECUDA_EXPORT CUresult cuMemsetD8(CUdeviceptr_v1 d, unsigned char v, unsigned int n) {
  return cuMemsetD8_v2(widen(d), v, n);
}
FAKECUDA_EXPORT CUresult cuMemsetD16(CUdeviceptr_v1 d, unsigned short v, unsigned int n) {
  return cuMemsetD16_v2(widen(d), v, n);
}
FAKECUDA_EXPORT CUresult cuMemsetD32(CUdeviceptr_v1 d, unsigned int v, unsigned int n) {
  return cuMemsetD32_v2(widen(d), v, n);
}
FAKECUDA_EXPORT CUresult cuMemsetD2D8(CUdeviceptr_v1 d, unsigned int pitch, unsigned char v,
                                      unsigned int w, unsigned int h) {
  return cuMemsetD2D8_v2(widen(d), pitch, v, w, h);
}
FAKECUDA_EXPORT CUresult cuMemsetD2D16(CUdeviceptr_v1 d, unsigned int pitch, unsigned short v,
                                       unsigned int w, unsigned int h) {
  return cuMemsetD2D16_v2(widen(d), pitch, v, w, h);
}
FAKECUDA_EXPORT CUresult cuMemsetD2D32(CUdeviceptr_v1 d, unsigned int pitch, unsigned int v,
                                       unsigned int w, unsigned int h) {
  return cuMemsetD2D32_v2(widen(d), pitch, v, w, h);
}

FAKECUDA_EXPORT CUresult cuArrayCreate(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  FAKECUDA_REQUIRE(desc, CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY_DESCRIPTOR wide{};
  wide.Width = desc->Width;
  wide.Height = desc->Height;
  wide.Format = desc->Format;
  wide.NumChannels = desc->NumChannels;
  return cuArrayCreate_v2(pHandle, &wide);
}
FAKECUDA_EXPORT CUresult cuArray3DCreate(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  FAKECUDA_REQUIRE(desc, CUDA_ERROR_INVALID_VALUE);
  const CUDA_ARRAY3D_DESCRIPTOR wide = from_v1(*desc);
  return cuArray3DCreate_v2(pHandle, &wide);
}
FAKECUDA_EXPORT CUresult cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR_v1* out, CUarray hArray) {
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY_DESCRIPTOR wide{};
  if (CUresult r = cuArrayGetDescriptor_v2(&wide, hArray); r != CUDA_SUCCESS) return r;
  out->Width = saturate(wide.Width);
  out->Height = saturate(wide.Height);
  out->Format = wide.Format;
  out->NumChannels = wide.NumChannels;
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR_v1* out, CUarray hArray) {
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR wide{};
  if (CUresult r = cuArray3DGetDescriptor_v2(&wide, hArray); r != CUDA_SUCCESS) return r;
  out->Width = saturate(wide.Width);
  out->Height = saturate(wide.Height);
  out->Depth = saturate(wide.Depth);
  out->Format = wide.Format;
  out->NumChannels = wide.NumChannels;
  out->Flags = wide.Flags;
  return CUDA_SUCCESS;
}
