// CUDA arrays and mipmapped arrays: opaque device memory, charged to the
// device like any allocation. Their contents exist once copied to or from
// (copies.cpp).
#include <algorithm>

#include "context.h"
#include "memory.h"

using namespace fakecuda;

namespace {

size_t format_bytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 0;
  }
}

// Bytes of one level; 0 when the descriptor is invalid.
size_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR& desc) {
  const size_t element = format_bytes(desc.Format);
  const unsigned channels = desc.NumChannels;
  if (!element || (channels != 1 && channels != 2 && channels != 4) || desc.Width == 0) return 0;
  if (desc.Depth && !desc.Height) return 0;
  return desc.Width * std::max<size_t>(desc.Height, 1) * std::max<size_t>(desc.Depth, 1) * element *
         channels;
}

CUresult create(const CUDA_ARRAY3D_DESCRIPTOR& desc, CUarray* handle) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(handle, CUDA_ERROR_INVALID_VALUE);
  const size_t bytes = array_bytes(desc);
  FAKECUDA_REQUIRE(bytes, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  const uint64_t charge = round_up(bytes, kPageSize);
  if (!d.shared().charge(ctx->physical, charge)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* array = new CUarray_st{kArrayMagic, ctx, desc, charge, nullptr, {}};
  d.live.insert(array);
  *handle = array;
  return CUDA_SUCCESS;
}

CUDA_ARRAY3D_DESCRIPTOR from_2d(const CUDA_ARRAY_DESCRIPTOR& desc) {
  CUDA_ARRAY3D_DESCRIPTOR out{};
  out.Width = desc.Width;
  out.Height = desc.Height;
  out.Format = desc.Format;
  out.NumChannels = desc.NumChannels;
  return out;
}

}  // namespace

namespace fakecuda {

size_t array_element_bytes(const CUDA_ARRAY3D_DESCRIPTOR& desc) {
  return format_bytes(desc.Format) * desc.NumChannels;
}

}  // namespace fakecuda

FAKECUDA_EXPORT CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  FAKECUDA_REQUIRE(desc, CUDA_ERROR_INVALID_VALUE);
  return create(from_2d(*desc), pHandle);
}

FAKECUDA_EXPORT CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  FAKECUDA_REQUIRE(desc, CUDA_ERROR_INVALID_VALUE);
  return create(*desc, pHandle);
}

FAKECUDA_EXPORT CUresult cuArrayDestroy(CUarray hArray) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hArray, kArrayMagic) && !hArray->owner, CUDA_ERROR_INVALID_HANDLE);
  d.shared().uncharge(hArray->ctx->physical, hArray->charged);
  d.live.erase(hArray);
  delete hArray;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* out, CUarray hArray) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hArray, kArrayMagic), CUDA_ERROR_INVALID_HANDLE);
  out->Width = hArray->desc.Width;
  out->Height = hArray->desc.Height;
  out->Format = hArray->desc.Format;
  out->NumChannels = hArray->desc.NumChannels;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* out, CUarray hArray) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hArray, kArrayMagic), CUDA_ERROR_INVALID_HANDLE);
  *out = hArray->desc;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                                const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                unsigned int numMipmapLevels) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pHandle && desc && numMipmapLevels > 0 && numMipmapLevels <= 32,
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(array_bytes(*desc), CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  auto mipmap = std::make_unique<CUmipmappedArray_st>();
  mipmap->magic = kMipmapMagic;
  mipmap->ctx = ctx;
  size_t total = 0;
  CUDA_ARRAY3D_DESCRIPTOR level = *desc;
  for (unsigned i = 0; i < numMipmapLevels; ++i) {
    total += array_bytes(level);
    mipmap->levels.push_back(
        std::unique_ptr<CUarray_st>(new CUarray_st{kArrayMagic, ctx, level, 0, mipmap.get(), {}}));
    level.Width = std::max<size_t>(level.Width / 2, 1);
    if (level.Height) level.Height = std::max<size_t>(level.Height / 2, 1);
    if (level.Depth) level.Depth = std::max<size_t>(level.Depth / 2, 1);
  }
  mipmap->charged = round_up(total, kPageSize);
  if (!d.shared().charge(ctx->physical, mipmap->charged)) return CUDA_ERROR_OUT_OF_MEMORY;
  for (auto& l : mipmap->levels)
    d.live.insert(l.get());
  d.live.insert(mipmap.get());
  *pHandle = mipmap.release();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMipmappedArrayGetLevel(CUarray* pLevelArray,
                                                  CUmipmappedArray hMipmappedArray,
                                                  unsigned int level) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pLevelArray, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hMipmappedArray, kMipmapMagic), CUDA_ERROR_INVALID_HANDLE);
  FAKECUDA_REQUIRE(level < hMipmappedArray->levels.size(), CUDA_ERROR_INVALID_VALUE);
  *pLevelArray = hMipmappedArray->levels[level].get();
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hMipmappedArray, kMipmapMagic), CUDA_ERROR_INVALID_HANDLE);
  d.shared().uncharge(hMipmappedArray->ctx->physical, hMipmappedArray->charged);
  for (auto& level : hMipmappedArray->levels)
    d.live.erase(level.get());
  d.live.erase(hMipmappedArray);
  delete hMipmappedArray;
  return CUDA_SUCCESS;
}
