// Hopper's tensor maps (TMA descriptors): the argument checks cuda.h
// documents, and an encoding that depends on the arguments alone.
#include <cstring>

#include "support.h"

namespace fakecuda::test {
namespace {

struct alignas(64) AlignedMap {
  CUtensorMap map;
};

class TensorMaps : public testing::Test {
 protected:
  void SetUp() override { init_primary(); }

  CUresult tiled(CUtensorMapDataType type, cuuint32_t rank, void* address, const cuuint64_t* dims,
                 const cuuint64_t* strides, const cuuint32_t* box,
                 const cuuint32_t* element_strides,
                 CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE,
                 CUtensorMapFloatOOBfill oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
                 CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE) {
    return cuTensorMapEncodeTiled(&out_.map, type, rank, address, dims, strides, box,
                                  element_strides, interleave, swizzle,
                                  CU_TENSOR_MAP_L2_PROMOTION_L2_128B, oob);
  }

  AlignedMap out_{};
  void* const address_ = reinterpret_cast<void*>(uintptr_t{0x7f0000000000});
  const cuuint64_t dims_[2] = {1024, 512};
  const cuuint64_t strides_[1] = {1024 * 2};
  const cuuint32_t box_[2] = {64, 128};
  const cuuint32_t ones_[5] = {1, 1, 1, 1, 1};
};

TEST_F(TensorMaps, ATiledMapIsEncodedDeterministically) {
  ASSERT_CU(tiled(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, address_, dims_, strides_, box_, ones_,
                  CU_TENSOR_MAP_SWIZZLE_128B));
  const CUtensorMap first = out_.map;
  out_ = AlignedMap{};
  ASSERT_CU(tiled(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, address_, dims_, strides_, box_, ones_,
                  CU_TENSOR_MAP_SWIZZLE_128B));
  EXPECT_EQ(std::memcmp(&first, &out_.map, sizeof(first)), 0);
  const cuuint32_t other_box[2] = {64, 64};
  ASSERT_CU(tiled(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, address_, dims_, strides_, other_box, ones_,
                  CU_TENSOR_MAP_SWIZZLE_128B));
  EXPECT_NE(std::memcmp(&first, &out_.map, sizeof(first)), 0);
}

TEST_F(TensorMaps, TiledArgumentsAreCheckedAsDocumented) {
  const auto bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  auto* misaligned = static_cast<char*>(address_) + 8;
  EXPECT_EQ(tiled(bf16, 2, misaligned, dims_, strides_, box_, ones_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(tiled(bf16, 0, address_, dims_, strides_, box_, ones_), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(tiled(bf16, 6, address_, dims_, strides_, box_, ones_), CUDA_ERROR_INVALID_VALUE);
  const cuuint64_t odd_stride[1] = {1000};
  EXPECT_EQ(tiled(bf16, 2, address_, dims_, odd_stride, box_, ones_), CUDA_ERROR_INVALID_VALUE);
  const cuuint64_t huge_stride[1] = {uint64_t{1} << 40};
  EXPECT_EQ(tiled(bf16, 2, address_, dims_, huge_stride, box_, ones_), CUDA_ERROR_INVALID_VALUE);
  const cuuint32_t big_box[2] = {64, 512};
  EXPECT_EQ(tiled(bf16, 2, address_, dims_, strides_, big_box, ones_), CUDA_ERROR_INVALID_VALUE);
  const cuuint32_t narrow_box[2] = {4, 128};  // 8 bytes: not a multiple of 16
  EXPECT_EQ(tiled(bf16, 2, address_, dims_, strides_, narrow_box, ones_), CUDA_ERROR_INVALID_VALUE);
  const cuuint32_t strides_of_nine[2] = {1, 9};
  EXPECT_EQ(tiled(bf16, 2, address_, dims_, strides_, box_, strides_of_nine),
            CUDA_ERROR_INVALID_VALUE);
  // 64 bf16 = 128 bytes of inner box: too wide for a 64-byte swizzle.
  EXPECT_EQ(tiled(bf16, 2, address_, dims_, strides_, box_, ones_, CU_TENSOR_MAP_SWIZZLE_64B),
            CUDA_ERROR_INVALID_VALUE);
  // NaN fill needs a floating-point type.
  EXPECT_EQ(tiled(CU_TENSOR_MAP_DATA_TYPE_INT32, 2, address_, dims_, strides_, box_, ones_,
                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_CU(tiled(bf16, 2, address_, dims_, strides_, box_, ones_, CU_TENSOR_MAP_SWIZZLE_NONE,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA));
  // Interleaving needs rank 3 or more.
  EXPECT_EQ(tiled(bf16, 2, address_, dims_, strides_, box_, ones_, CU_TENSOR_MAP_SWIZZLE_32B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, CU_TENSOR_MAP_INTERLEAVE_32B),
            CUDA_ERROR_INVALID_VALUE);
  // The map itself must be 64-byte aligned.
  alignas(64) unsigned char storage[sizeof(CUtensorMap) + 64];
  auto* unaligned = reinterpret_cast<CUtensorMap*>(storage + 16);
  EXPECT_EQ(
      cuTensorMapEncodeTiled(unaligned, bf16, 2, address_, dims_, strides_, box_, ones_,
                             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                             CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      CUDA_ERROR_INVALID_VALUE);
}

TEST_F(TensorMaps, Im2colNeedsRankThreeToFiveAndCornersInRange) {
  const cuuint64_t dims[4] = {64, 32, 32, 8};  // C, W, H, N
  const cuuint64_t strides[3] = {64 * 2, 64 * 2 * 32, 64 * 2 * 32 * 32};
  const int lower[2] = {-1, -1}, upper[2] = {1, 1};
  auto im2col = [&](cuuint32_t rank, const int* lo, const int* hi, cuuint32_t channels) {
    return cuTensorMapEncodeIm2col(
        &out_.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank, address_, dims, strides, lo, hi, channels,
        128, ones_, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  EXPECT_CU(im2col(4, lower, upper, 64));
  EXPECT_EQ(im2col(2, lower, upper, 64), CUDA_ERROR_INVALID_VALUE);
  const int far[2] = {-200, 0};  // rank 4 allows [-128, 127]
  EXPECT_EQ(im2col(4, far, upper, 64), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(im2col(4, lower, upper, 512), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(TensorMaps, Im2colWideIsForBlackwellOnly) {
  const cuuint64_t dims[3] = {64, 32, 8};
  const cuuint64_t strides[2] = {128, 128 * 32};
  EXPECT_EQ(cuTensorMapEncodeIm2colWide(
                &out_.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, address_, dims, strides, 0, 0, 64,
                128, ones_, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_IM2COL_WIDE_MODE_W,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(TensorMaps, ReplacingTheAddressChangesOnlyTheAddress) {
  ASSERT_CU(tiled(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, address_, dims_, strides_, box_, ones_));
  AlignedMap expected{};
  void* moved = static_cast<char*>(address_) + 4096;
  ASSERT_CU(cuTensorMapEncodeTiled(&expected.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, moved, dims_,
                                   strides_, box_, ones_, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                   CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  ASSERT_CU(cuTensorMapReplaceAddress(&out_.map, moved));
  EXPECT_EQ(std::memcmp(&out_.map, &expected.map, sizeof(CUtensorMap)), 0);
  EXPECT_EQ(cuTensorMapReplaceAddress(&out_.map, static_cast<char*>(moved) + 4),
            CUDA_ERROR_INVALID_VALUE);
}

TEST(TensorMapContext, EncodingNeedsACurrentContext) {
  ASSERT_CU(cuInit(0));
  ASSERT_CU(cuCtxSetCurrent(nullptr));
  AlignedMap out{};
  const cuuint64_t dims[1] = {1024};
  const cuuint32_t box[1] = {64}, ones[1] = {1};
  EXPECT_EQ(
      cuTensorMapEncodeTiled(&out.map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 1, nullptr, dims, nullptr,
                             box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                             CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      CUDA_ERROR_INVALID_CONTEXT);
}

}  // namespace
}  // namespace fakecuda::test
