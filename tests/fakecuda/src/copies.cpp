// Strided and peer copies: cuMemcpy2D/3D (host, device, unified memory and
// arrays on either side), their peer forms and cuMemcpyPeer. Every kind of
// memory is host address space here, so a copy really moves the bytes, in
// stream order for the asynchronous forms; arrays get their bytes at their
// first copy.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "context.h"
#include "memory.h"
#include "stream.h"

using namespace fakecuda;

namespace fakecuda {

ArrayBytes::~ArrayBytes() {
  if (data) munmap(data, bytes);
}

}  // namespace fakecuda

namespace {

constexpr size_t kMaxPitch = 2147483647;  // CU_DEVICE_ATTRIBUTE_MAX_PITCH

// One side of a copy, resolved: where row 0 of slice 0 starts, and the
// strides from there.
struct Side {
  unsigned char* base = nullptr;
  size_t pitch = 0;
  size_t slice = 0;  // bytes from one slice to the next
};

// The bytes of `array`, made on first use (caller holds Driver::mu).
unsigned char* array_contents_locked(CUarray_st* array, size_t bytes) {
  if (!array->contents.data) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    array->contents.data = p;
    array->contents.bytes = bytes;
  }
  return static_cast<unsigned char*>(array->contents.data);
}

struct SideArgs {
  size_t x, y, z, lod;
  CUmemorytype type;
  const void* host;
  CUdeviceptr device;
  CUarray array;
  size_t pitch, height;
};

// Validates one side as the real driver does and resolves it (caller holds
// Driver::mu).
CUresult resolve_side_locked(const SideArgs& s, size_t width, size_t height, size_t depth,
                             bool check_pitch, Side* out) {
  FAKECUDA_REQUIRE(s.lod == 0, CUDA_ERROR_INVALID_VALUE);
  switch (s.type) {
    case CU_MEMORYTYPE_HOST:
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_UNIFIED: {
      const uintptr_t p = s.type == CU_MEMORYTYPE_HOST ? reinterpret_cast<uintptr_t>(s.host)
                                                       : static_cast<uintptr_t>(s.device);
      FAKECUDA_REQUIRE(p, CUDA_ERROR_INVALID_VALUE);
      // Pitch and slice height matter only when there is more than one row
      // or slice; then they must hold the copied rows.
      if (height > 1 || depth > 1 || s.y || s.z)
        FAKECUDA_REQUIRE(s.pitch >= width + s.x, CUDA_ERROR_INVALID_VALUE);
      if (depth > 1 || s.z) FAKECUDA_REQUIRE(s.height >= height + s.y, CUDA_ERROR_INVALID_VALUE);
      FAKECUDA_REQUIRE(!check_pitch || s.pitch <= kMaxPitch, CUDA_ERROR_INVALID_VALUE);
      out->pitch = s.pitch;
      out->slice = s.pitch * s.height;
      out->base = reinterpret_cast<unsigned char*>(p) + s.z * out->slice + s.y * s.pitch + s.x;
      return CUDA_SUCCESS;
    }
    case CU_MEMORYTYPE_ARRAY: {
      CUarray_st* a = s.array;
      FAKECUDA_REQUIRE(Driver::get().is_live(a, kArrayMagic), CUDA_ERROR_INVALID_HANDLE);
      const size_t element = array_element_bytes(a->desc);
      const size_t row = a->desc.Width * element;
      const size_t rows = std::max<size_t>(a->desc.Height, 1);
      const size_t slices = std::max<size_t>(a->desc.Depth, 1);
      FAKECUDA_REQUIRE(element && s.x % element == 0 && width % element == 0,
                       CUDA_ERROR_INVALID_VALUE);
      FAKECUDA_REQUIRE(s.x + width <= row && s.y + height <= rows && s.z + depth <= slices,
                       CUDA_ERROR_INVALID_VALUE);
      unsigned char* bytes = array_contents_locked(a, row * rows * slices);
      FAKECUDA_REQUIRE(bytes, CUDA_ERROR_OUT_OF_MEMORY);
      out->pitch = row;
      out->slice = row * rows;
      out->base = bytes + s.z * out->slice + s.y * row + s.x;
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

SideArgs source_of(const CUDA_MEMCPY3D& c) {
  return SideArgs{c.srcXInBytes, c.srcY,      c.srcZ,     c.srcLOD,   c.srcMemoryType,
                  c.srcHost,     c.srcDevice, c.srcArray, c.srcPitch, c.srcHeight};
}
SideArgs destination_of(const CUDA_MEMCPY3D& c) {
  return SideArgs{c.dstXInBytes, c.dstY,      c.dstZ,     c.dstLOD,   c.dstMemoryType,
                  c.dstHost,     c.dstDevice, c.dstArray, c.dstPitch, c.dstHeight};
}

// Runs one 3D copy in stream order: synchronously in the default stream
// (`sync`) or enqueued on `stream`.
CUresult copy_3d(const CUDA_MEMCPY3D& c, bool check_pitch, DefaultStream mode, CUstream stream,
                 bool sync) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(!c.reserved0 && !c.reserved1, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  const size_t width = c.WidthInBytes, height = c.Height, depth = c.Depth;
  if (width == 0 || height == 0 || depth == 0) return CUDA_SUCCESS;
  Side src, dst;
  if (CUresult r = resolve_side_locked(source_of(c), width, height, depth, check_pitch, &src);
      r != CUDA_SUCCESS)
    return r;
  if (CUresult r = resolve_side_locked(destination_of(c), width, height, depth, check_pitch, &dst);
      r != CUDA_SUCCESS)
    return r;
  Op op = action_op([src, dst, width, height, depth](uint64_t) {
    for (size_t z = 0; z < depth; ++z)
      for (size_t y = 0; y < height; ++y)
        std::memmove(dst.base + z * dst.slice + y * dst.pitch,
                     src.base + z * src.slice + y * src.pitch, width);
  });
  if (sync) return submit_and_wait(lock, mode, std::move(op));
  return submit_locked(stream, mode, std::move(op));
}

CUDA_MEMCPY3D from_2d(const CUDA_MEMCPY2D& c) {
  CUDA_MEMCPY3D out{};
  out.srcXInBytes = c.srcXInBytes;
  out.srcY = c.srcY;
  out.srcMemoryType = c.srcMemoryType;
  out.srcHost = c.srcHost;
  out.srcDevice = c.srcDevice;
  out.srcArray = c.srcArray;
  out.srcPitch = c.srcPitch;
  out.dstXInBytes = c.dstXInBytes;
  out.dstY = c.dstY;
  out.dstMemoryType = c.dstMemoryType;
  out.dstHost = c.dstHost;
  out.dstDevice = c.dstDevice;
  out.dstArray = c.dstArray;
  out.dstPitch = c.dstPitch;
  out.WidthInBytes = c.WidthInBytes;
  out.Height = c.Height;
  out.Depth = 1;
  return out;
}

CUresult copy_2d(const CUDA_MEMCPY2D* c, bool check_pitch, DefaultStream mode, CUstream stream,
                 bool sync) {
  FAKECUDA_REQUIRE(c, CUDA_ERROR_INVALID_VALUE);
  return copy_3d(from_2d(*c), check_pitch, mode, stream, sync);
}

// The peer form names each side's context; the copy itself is the same.
CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER* c, DefaultStream mode, CUstream stream, bool sync) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(c, CUDA_ERROR_INVALID_VALUE);
  {
    std::lock_guard<std::mutex> guard(Driver::get().mu);
    if (c->srcMemoryType != CU_MEMORYTYPE_ARRAY)
      FAKECUDA_REQUIRE(live_context(c->srcContext), CUDA_ERROR_INVALID_CONTEXT);
    if (c->dstMemoryType != CU_MEMORYTYPE_ARRAY)
      FAKECUDA_REQUIRE(live_context(c->dstContext), CUDA_ERROR_INVALID_CONTEXT);
  }
  CUDA_MEMCPY3D out{};
  out.srcXInBytes = c->srcXInBytes;
  out.srcY = c->srcY;
  out.srcZ = c->srcZ;
  out.srcLOD = c->srcLOD;
  out.srcMemoryType = c->srcMemoryType;
  out.srcHost = c->srcHost;
  out.srcDevice = c->srcDevice;
  out.srcArray = c->srcArray;
  out.srcPitch = c->srcPitch;
  out.srcHeight = c->srcHeight;
  out.dstXInBytes = c->dstXInBytes;
  out.dstY = c->dstY;
  out.dstZ = c->dstZ;
  out.dstLOD = c->dstLOD;
  out.dstMemoryType = c->dstMemoryType;
  out.dstHost = c->dstHost;
  out.dstDevice = c->dstDevice;
  out.dstArray = c->dstArray;
  out.dstPitch = c->dstPitch;
  out.dstHeight = c->dstHeight;
  out.WidthInBytes = c->WidthInBytes;
  out.Height = c->Height;
  out.Depth = c->Depth;
  return copy_3d(out, true, mode, stream, sync);
}

CUresult copy_peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                   size_t bytes, DefaultStream mode, CUstream stream, bool sync) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  FAKECUDA_REQUIRE(live_context(dst_ctx) && live_context(src_ctx), CUDA_ERROR_INVALID_CONTEXT);
  if (bytes == 0) return CUDA_SUCCESS;
  FAKECUDA_REQUIRE(dst && src, CUDA_ERROR_INVALID_VALUE);
  Op op = action_op([dst, src, bytes](uint64_t) {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  });
  if (sync) return submit_and_wait(lock, mode, std::move(op));
  return submit_locked(stream, mode, std::move(op));
}

}  // namespace

// cuMemcpy2D checks pitches against CU_DEVICE_ATTRIBUTE_MAX_PITCH;
// cuMemcpy2DUnaligned does not.
FAKECUDA_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) {
  return copy_2d(c, true, DefaultStream::kLegacy, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* c) {
  return copy_2d(c, true, DefaultStream::kPerThread, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* c) {
  return copy_2d(c, false, DefaultStream::kLegacy, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* c) {
  return copy_2d(c, false, DefaultStream::kPerThread, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream s) {
  return copy_2d(c, true, DefaultStream::kLegacy, s, false);
}
FAKECUDA_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* c, CUstream s) {
  return copy_2d(c, true, DefaultStream::kPerThread, s, false);
}

FAKECUDA_EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* c) {
  FAKECUDA_REQUIRE(c, CUDA_ERROR_INVALID_VALUE);
  return copy_3d(*c, true, DefaultStream::kLegacy, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* c) {
  FAKECUDA_REQUIRE(c, CUDA_ERROR_INVALID_VALUE);
  return copy_3d(*c, true, DefaultStream::kPerThread, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* c, CUstream s) {
  FAKECUDA_REQUIRE(c, CUDA_ERROR_INVALID_VALUE);
  return copy_3d(*c, true, DefaultStream::kLegacy, s, false);
}
FAKECUDA_EXPORT CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* c, CUstream s) {
  FAKECUDA_REQUIRE(c, CUDA_ERROR_INVALID_VALUE);
  return copy_3d(*c, true, DefaultStream::kPerThread, s, false);
}

FAKECUDA_EXPORT CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* c) {
  return copy_3d_peer(c, DefaultStream::kLegacy, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* c) {
  return copy_3d_peer(c, DefaultStream::kPerThread, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* c, CUstream s) {
  return copy_3d_peer(c, DefaultStream::kLegacy, s, false);
}
FAKECUDA_EXPORT CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* c, CUstream s) {
  return copy_3d_peer(c, DefaultStream::kPerThread, s, false);
}

FAKECUDA_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src,
                                      CUcontext srcCtx, size_t n) {
  return copy_peer(dst, dstCtx, src, srcCtx, n, DefaultStream::kLegacy, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src,
                                           CUcontext srcCtx, size_t n) {
  return copy_peer(dst, dstCtx, src, srcCtx, n, DefaultStream::kPerThread, nullptr, true);
}
FAKECUDA_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src,
                                           CUcontext srcCtx, size_t n, CUstream s) {
  return copy_peer(dst, dstCtx, src, srcCtx, n, DefaultStream::kLegacy, s, false);
}
FAKECUDA_EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src,
                                                CUcontext srcCtx, size_t n, CUstream s) {
  return copy_peer(dst, dstCtx, src, srcCtx, n, DefaultStream::kPerThread, s, false);
}
