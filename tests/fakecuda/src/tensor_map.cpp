// Tensor maps (TMA descriptors, compute capability 9.0+): the argument checks
// cuda.h documents for cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col,
// cuTensorMapEncodeIm2colWide and cuTensorMapReplaceAddress, and an opaque
// 128-byte encoding that depends only on the arguments. Nothing reads the
// encoding but cuTensorMapReplaceAddress: kernels do not run.
//
// Encoding (16 qwords): 0 the global address; 1 the kind and the enums;
// 2-6 the global dimensions; 7-10 the strides; 11 box dimensions and element
// strides (each less one, 8 and 4 bits); 12-13 the im2col corners (16 bits
// each); 14 channels, pixels per column and wide mode; 15 a tag.
#include <cstring>

#include "context.h"

using namespace fakecuda;

namespace {

constexpr uint64_t kTensorMapTag = 0x7e45'0a3d'fa4e'c0daull;

enum class Layout : uint64_t { kTiled = 1, kIm2col = 2, kIm2colWide = 3 };

struct Common {
  CUtensorMapDataType type;
  cuuint32_t rank;
  void* address;
  const cuuint64_t* dims;
  const cuuint64_t* strides;
  const cuuint32_t* element_strides;
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2;
  CUtensorMapFloatOOBfill oob;
};

// Bits one element takes in memory; 0 for a value that is not a data type.
// The packed types hold 16 values in 8 or 16 bytes.
unsigned element_bits(CUtensorMapDataType type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
      return 8;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
      return 16;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return 32;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
      return 64;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B:
      return 4;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B:
    case CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B:
      return 8;
  }
  return 0;
}

bool is_float(CUtensorMapDataType type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return true;
    default:
      return false;
  }
}

bool aligned_16b_packed(CUtensorMapDataType type) {
  return type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B ||
         type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

// Bytes of the swizzle span; 0 for no swizzle, -1 for a value that is none.
int swizzle_span(CUtensorMapSwizzle swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_NONE:
      return 0;
    case CU_TENSOR_MAP_SWIZZLE_32B:
      return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B:
      return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B:
    case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B:
      return 128;
  }
  return -1;
}

// Alignment the global address and strides need.
uint64_t address_alignment(CUtensorMapDataType type, CUtensorMapInterleave interleave) {
  return interleave == CU_TENSOR_MAP_INTERLEAVE_32B || aligned_16b_packed(type) ? 32 : 16;
}

// A tensor map is made for the current context's device, which must have TMA.
CUresult check_device(uint32_t min_major) {
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(d.device(ctx->ordinal).config->cc_major >= min_major, CUDA_ERROR_INVALID_VALUE);
  return CUDA_SUCCESS;
}

// The checks every encoding shares. `inner_bytes` is the bytes of the box's
// innermost dimension, which the swizzle span bounds.
CUresult check_common(const Common& c, cuuint32_t min_rank, uint64_t inner_bytes) {
  FAKECUDA_REQUIRE(element_bits(c.type) != 0, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(c.rank >= min_rank && c.rank <= 5, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(
      c.interleave >= CU_TENSOR_MAP_INTERLEAVE_NONE && c.interleave <= CU_TENSOR_MAP_INTERLEAVE_32B,
      CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(c.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE || c.rank >= 3,
                   CUDA_ERROR_INVALID_VALUE);
  const uint64_t alignment = address_alignment(c.type, c.interleave);
  FAKECUDA_REQUIRE(reinterpret_cast<uintptr_t>(c.address) % alignment == 0,
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(c.dims && c.element_strides && (c.rank == 1 || c.strides),
                   CUDA_ERROR_INVALID_VALUE);
  for (cuuint32_t i = 0; i < c.rank; ++i) {
    FAKECUDA_REQUIRE(c.dims[i] > 0 && c.dims[i] <= (1ull << 32), CUDA_ERROR_INVALID_VALUE);
    FAKECUDA_REQUIRE(c.element_strides[i] > 0 && c.element_strides[i] <= 8,
                     CUDA_ERROR_INVALID_VALUE);
  }
  if (aligned_16b_packed(c.type)) FAKECUDA_REQUIRE(c.dims[0] % 128 == 0, CUDA_ERROR_INVALID_VALUE);
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B)
    FAKECUDA_REQUIRE(c.dims[0] % 2 == 0, CUDA_ERROR_INVALID_VALUE);
  for (cuuint32_t i = 0; i + 1 < c.rank; ++i)
    FAKECUDA_REQUIRE(c.strides[i] % alignment == 0 && c.strides[i] < (1ull << 40),
                     CUDA_ERROR_INVALID_VALUE);

  const int span = swizzle_span(c.swizzle);
  FAKECUDA_REQUIRE(span >= 0, CUDA_ERROR_INVALID_VALUE);
  if (c.interleave == CU_TENSOR_MAP_INTERLEAVE_32B)
    FAKECUDA_REQUIRE(c.swizzle == CU_TENSOR_MAP_SWIZZLE_32B, CUDA_ERROR_INVALID_VALUE);
  if (c.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && span > 0)
    FAKECUDA_REQUIRE(inner_bytes <= static_cast<uint64_t>(span), CUDA_ERROR_INVALID_VALUE);
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B) {
    FAKECUDA_REQUIRE(c.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE, CUDA_ERROR_INVALID_VALUE);
    FAKECUDA_REQUIRE(c.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE ||
                         c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
                         c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B ||
                         c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B,
                     CUDA_ERROR_INVALID_VALUE);
  }
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B)
    FAKECUDA_REQUIRE(c.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE ||
                         c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
                         c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B,
                     CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(
      c.l2 >= CU_TENSOR_MAP_L2_PROMOTION_NONE && c.l2 <= CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(
      c.oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE ||
          (c.oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && is_float(c.type)),
      CUDA_ERROR_INVALID_VALUE);
  return CUDA_SUCCESS;
}

void encode_common(CUtensorMap* map, Layout layout, const Common& c) {
  std::memset(map, 0, sizeof(*map));
  uint64_t* q = map->opaque;
  q[0] = reinterpret_cast<uintptr_t>(c.address);
  q[1] = static_cast<uint64_t>(layout) | uint64_t{c.rank} << 4 |
         static_cast<uint64_t>(c.type) << 8 | static_cast<uint64_t>(c.interleave) << 16 |
         static_cast<uint64_t>(c.swizzle) << 20 | static_cast<uint64_t>(c.l2) << 24 |
         static_cast<uint64_t>(c.oob) << 28;
  for (cuuint32_t i = 0; i < c.rank; ++i) {
    q[2 + i] = c.dims[i];
    q[11] |= uint64_t{c.element_strides[i] - 1} << (40 + 4 * i);
  }
  for (cuuint32_t i = 0; i + 1 < c.rank; ++i)
    q[7 + i] = c.strides[i];
  q[15] = kTensorMapTag;
}

uint64_t corner_bits(int value) {
  return static_cast<uint16_t>(static_cast<int16_t>(value));
}

}  // namespace

FAKECUDA_EXPORT CUresult cuTensorMapEncodeTiled(
    CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
    const cuuint32_t* boxDim, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  FAKECUDA_REQUIRE_INIT();
  if (CUresult r = check_device(9); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(tensorMap && reinterpret_cast<uintptr_t>(tensorMap) % 64 == 0 && boxDim,
                   CUDA_ERROR_INVALID_VALUE);
  const Common c{tensorDataType, tensorRank, globalAddress, globalDim,   globalStrides,
                 elementStrides, interleave, swizzle,       l2Promotion, oobFill};
  FAKECUDA_REQUIRE(tensorRank >= 1 && tensorRank <= 5 && element_bits(tensorDataType) != 0,
                   CUDA_ERROR_INVALID_VALUE);
  for (cuuint32_t i = 0; i < tensorRank; ++i)
    FAKECUDA_REQUIRE(boxDim[i] > 0 && boxDim[i] <= 256, CUDA_ERROR_INVALID_VALUE);
  const uint64_t inner_bytes = uint64_t{boxDim[0]} * element_bits(tensorDataType) / 8;
  if (CUresult r = check_common(c, 1, inner_bytes); r != CUDA_SUCCESS) return r;
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE)
    FAKECUDA_REQUIRE(inner_bytes % 16 == 0, CUDA_ERROR_INVALID_VALUE);
  if (aligned_16b_packed(tensorDataType))
    FAKECUDA_REQUIRE(boxDim[0] == 128, CUDA_ERROR_INVALID_VALUE);
  encode_common(tensorMap, Layout::kTiled, c);
  for (cuuint32_t i = 0; i < tensorRank; ++i)
    tensorMap->opaque[11] |= uint64_t{boxDim[i] - 1} << (8 * i);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuTensorMapEncodeIm2col(
    CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
    const int* pixelBoxLowerCorner, const int* pixelBoxUpperCorner, cuuint32_t channelsPerPixel,
    cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  FAKECUDA_REQUIRE_INIT();
  if (CUresult r = check_device(9); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(tensorMap && reinterpret_cast<uintptr_t>(tensorMap) % 64 == 0 &&
                       pixelBoxLowerCorner && pixelBoxUpperCorner,
                   CUDA_ERROR_INVALID_VALUE);
  const Common c{tensorDataType, tensorRank, globalAddress, globalDim,   globalStrides,
                 elementStrides, interleave, swizzle,       l2Promotion, oobFill};
  FAKECUDA_REQUIRE(tensorRank >= 3 && tensorRank <= 5 && globalDim, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(channelsPerPixel > 0 && channelsPerPixel <= 256, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(pixelsPerColumn > 0 && pixelsPerColumn <= 1024, CUDA_ERROR_INVALID_VALUE);
  if (aligned_16b_packed(tensorDataType))
    FAKECUDA_REQUIRE(channelsPerPixel == 128, CUDA_ERROR_INVALID_VALUE);
  // One spatial offset per dimension between C and N ({D, H, W}), narrower
  // the more there are; the box they bound must not be empty.
  const int spatial = static_cast<int>(tensorRank) - 2;
  const int limit = spatial == 1 ? 32768 : spatial == 2 ? 128 : 16;
  for (int i = 0; i < spatial; ++i) {
    const int lower = pixelBoxLowerCorner[i], upper = pixelBoxUpperCorner[i];
    FAKECUDA_REQUIRE(lower >= -limit && lower < limit && upper >= -limit && upper < limit,
                     CUDA_ERROR_INVALID_VALUE);
    // Corner i belongs to dimension rank-2-i (W is dimension 1).
    const int64_t extent =
        static_cast<int64_t>(globalDim[static_cast<size_t>(spatial - i)]) + upper - lower;
    FAKECUDA_REQUIRE(extent > 0, CUDA_ERROR_INVALID_VALUE);
  }
  const uint64_t inner_bytes = uint64_t{channelsPerPixel} * element_bits(tensorDataType) / 8;
  if (CUresult r = check_common(c, 3, inner_bytes); r != CUDA_SUCCESS) return r;
  encode_common(tensorMap, Layout::kIm2col, c);
  for (int i = 0; i < spatial; ++i) {
    tensorMap->opaque[12] |= corner_bits(pixelBoxLowerCorner[i]) << (16 * i);
    tensorMap->opaque[13] |= corner_bits(pixelBoxUpperCorner[i]) << (16 * i);
  }
  tensorMap->opaque[14] = channelsPerPixel | uint64_t{pixelsPerColumn} << 16;
  return CUDA_SUCCESS;
}

// Documented for compute capability 10.0 and higher only: refused on Hopper.
FAKECUDA_EXPORT CUresult cuTensorMapEncodeIm2colWide(
    CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
    void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
    int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel,
    cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  FAKECUDA_REQUIRE_INIT();
  if (CUresult r = check_device(10); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(tensorMap && reinterpret_cast<uintptr_t>(tensorMap) % 64 == 0,
                   CUDA_ERROR_INVALID_VALUE);
  const Common c{tensorDataType, tensorRank, globalAddress, globalDim,   globalStrides,
                 elementStrides, interleave, swizzle,       l2Promotion, oobFill};
  FAKECUDA_REQUIRE(tensorRank >= 3 && tensorRank <= 5 && globalDim, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(
      mode == CU_TENSOR_MAP_IM2COL_WIDE_MODE_W || mode == CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128,
      CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(swizzle == CU_TENSOR_MAP_SWIZZLE_64B || swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
                       swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B,
                   CUDA_ERROR_INVALID_VALUE);
  for (int corner : {pixelBoxLowerCornerWidth, pixelBoxUpperCornerWidth})
    FAKECUDA_REQUIRE(corner >= -32768 && corner <= 32767, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(
      static_cast<int64_t>(globalDim[1]) + pixelBoxUpperCornerWidth - pixelBoxLowerCornerWidth > 0,
      CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(channelsPerPixel > 0 && channelsPerPixel <= 256, CUDA_ERROR_INVALID_VALUE);
  if (aligned_16b_packed(tensorDataType))
    FAKECUDA_REQUIRE(channelsPerPixel == 128, CUDA_ERROR_INVALID_VALUE);
  if (mode == CU_TENSOR_MAP_IM2COL_WIDE_MODE_W)
    FAKECUDA_REQUIRE(pixelsPerColumn > 0 && pixelsPerColumn <= 1024, CUDA_ERROR_INVALID_VALUE);
  const uint64_t inner_bytes = uint64_t{channelsPerPixel} * element_bits(tensorDataType) / 8;
  if (CUresult r = check_common(c, 3, inner_bytes); r != CUDA_SUCCESS) return r;
  encode_common(tensorMap, Layout::kIm2colWide, c);
  tensorMap->opaque[12] = corner_bits(pixelBoxLowerCornerWidth);
  tensorMap->opaque[13] = corner_bits(pixelBoxUpperCornerWidth);
  tensorMap->opaque[14] =
      channelsPerPixel | uint64_t{pixelsPerColumn} << 16 | static_cast<uint64_t>(mode) << 32;
  return CUDA_SUCCESS;
}

// A new global address for an encoded map, aligned as its layout needs.
FAKECUDA_EXPORT CUresult cuTensorMapReplaceAddress(CUtensorMap* tensorMap, void* globalAddress) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(tensorMap && reinterpret_cast<uintptr_t>(tensorMap) % 64 == 0,
                   CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE(tensorMap->opaque[15] == kTensorMapTag, CUDA_ERROR_INVALID_VALUE);
  const uint64_t header = tensorMap->opaque[1];
  const auto type = static_cast<CUtensorMapDataType>((header >> 8) & 0xff);
  const auto interleave = static_cast<CUtensorMapInterleave>((header >> 16) & 0xf);
  FAKECUDA_REQUIRE(
      reinterpret_cast<uintptr_t>(globalAddress) % address_alignment(type, interleave) == 0,
      CUDA_ERROR_INVALID_VALUE);
  tensorMap->opaque[0] = reinterpret_cast<uintptr_t>(globalAddress);
  return CUDA_SUCCESS;
}
