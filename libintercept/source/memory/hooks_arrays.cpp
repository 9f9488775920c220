// CUDA arrays: opaque device memory of width × height × depth elements.
// Counted as that many bytes (the driver may pad rows; the padding is not
// counted), on the current context's device; destroying gives it back.
#include <algorithm>

#include "memory/accounting.h"

using namespace gpulimit;

namespace {

uint64_t element_bytes(CUarray_format format, unsigned channels) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return channels;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2ull * channels;
    default:  // 32-bit formats; newer packed formats are no larger per channel
      return 4ull * channels;
  }
}

uint64_t extent(size_t width, size_t height, size_t depth, CUarray_format format,
                unsigned channels) {
  return uint64_t{width} * std::max<size_t>(height, 1) * std::max<size_t>(depth, 1) *
         element_bytes(format, channels);
}

template <typename Create>
CUresult create_array(CUarray* handle, uint64_t bytes, Create&& create) {
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tenant || !handle || bytes == 0) return create();
  return charged<true>(
      tenant, current_device(tenant), bytes,
      [&](uint64_t* key) {
        CUresult r = create();
        *key = reinterpret_cast<uint64_t>(*handle);
        return r;
      },
      [](uint64_t key) { real_function(real::cuArrayDestroy)(reinterpret_cast<CUarray>(key)); });
}

}  // namespace

GPULIMIT_EXPORT CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc) {
  auto real = real_function(real::cuArrayCreate_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  const uint64_t bytes =
      desc ? extent(desc->Width, desc->Height, 0, desc->Format, desc->NumChannels) : 0;
  return create_array(handle, bytes, [&] { return real(handle, desc); });
}

GPULIMIT_EXPORT CUresult cuArrayCreate(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR_v1* desc) {
  auto real = real_function(real::cuArrayCreate);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  const uint64_t bytes =
      desc ? extent(desc->Width, desc->Height, 0, desc->Format, desc->NumChannels) : 0;
  return create_array(handle, bytes, [&] { return real(handle, desc); });
}

GPULIMIT_EXPORT CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  auto real = real_function(real::cuArray3DCreate_v2);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  const uint64_t bytes =
      desc ? extent(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels) : 0;
  return create_array(handle, bytes, [&] { return real(handle, desc); });
}

GPULIMIT_EXPORT CUresult cuArray3DCreate(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc) {
  auto real = real_function(real::cuArray3DCreate);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  const uint64_t bytes =
      desc ? extent(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels) : 0;
  return create_array(handle, bytes, [&] { return real(handle, desc); });
}

GPULIMIT_EXPORT CUresult cuArrayDestroy(CUarray array) {
  auto real = real_function(real::cuArrayDestroy);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return uncharged<true>(reinterpret_cast<uint64_t>(array), [&] { return real(array); });
}

GPULIMIT_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* handle,
                                                const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                                unsigned int levels) {
  auto real = real_function(real::cuMipmappedArrayCreate);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  Tenant* tenant = Tenant::limited();
  if (!tenant && Tenant::refused()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!tenant || !handle || !desc || levels == 0) return real(handle, desc, levels);
  // Every level halves each extent, down to 1.
  uint64_t bytes = 0;
  size_t w = desc->Width, h = desc->Height, d = desc->Depth;
  for (unsigned i = 0; i < levels && i < 32; ++i) {
    bytes += extent(w, h, d, desc->Format, desc->NumChannels);
    w = std::max<size_t>(w / 2, 1);
    if (h) h = std::max<size_t>(h / 2, 1);
    if (d) d = std::max<size_t>(d / 2, 1);
  }
  return charged<true>(
      tenant, current_device(tenant), bytes,
      [&](uint64_t* key) {
        CUresult r = real(handle, desc, levels);
        *key = reinterpret_cast<uint64_t>(*handle);
        return r;
      },
      [](uint64_t key) {
        real_function(real::cuMipmappedArrayDestroy)(reinterpret_cast<CUmipmappedArray>(key));
      });
}

GPULIMIT_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  auto real = real_function(real::cuMipmappedArrayDestroy);
  if (!real) return CUDA_ERROR_NOT_FOUND;
  return uncharged<true>(reinterpret_cast<uint64_t>(array), [&] { return real(array); });
}
