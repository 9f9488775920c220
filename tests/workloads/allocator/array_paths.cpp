// CUDA arrays, the opaque texture layouts: cuArrayCreate_v2,
// cuArray3DCreate_v2 and cuMipmappedArrayCreate, given back with
// cuArrayDestroy and cuMipmappedArrayDestroy.
//
// Every shape uses four 32-bit channels (16 bytes an element) and fixed row
// and slice sizes that divide kAllocationUnit, so an allocation of N bytes is
// exactly N bytes of elements, within the texture limits of current GPUs
// (2D 131072 x 65536, 3D 16384^3, mipmapped 2D 32768^2). `obtained` counts
// elements; a GPU may pad the opaque layout, which cuMemGetInfo then shows.
#include <algorithm>
#include <vector>

#include "allocation_path.h"
#include "cu_check.h"

namespace workloads {
namespace {

constexpr unsigned kChannels = 4;
constexpr uint64_t kElementBytes = 4 * kChannels;
constexpr CUarray_format kFormat = CU_AD_FORMAT_UNSIGNED_INT32;

// Arrays of either dimensionality, given back with cuArrayDestroy.
class CudaArrayPath : public AllocationPath {
 public:
  CUresult release_all() override {
    while (!arrays_.empty()) {
      CU_CHECK(cuArrayDestroy(arrays_.back()));
      arrays_.pop_back();
    }
    return CUDA_SUCCESS;
  }

 protected:
  std::vector<CUarray> arrays_;
};

// 16384 elements a row: 256 KiB, so rows = bytes / 256 KiB (up to 16 GiB).
class ArrayPath final : public CudaArrayPath {
 public:
  CUresult allocate(uint64_t bytes, uint64_t& obtained) override {
    constexpr size_t kWidth = 16384;
    CUDA_ARRAY_DESCRIPTOR descriptor = {};
    descriptor.Width = kWidth;
    descriptor.Height = bytes / (kWidth * kElementBytes);
    descriptor.Format = kFormat;
    descriptor.NumChannels = kChannels;
    CUarray array = nullptr;
    const CUresult result = CU(cuArrayCreate)(&array, &descriptor);
    if (result != CUDA_SUCCESS) return result;
    arrays_.push_back(array);
    obtained = descriptor.Width * descriptor.Height * kElementBytes;
    return CUDA_SUCCESS;
  }
};

// Slices of 1024 x 128 elements: 2 MiB, so depth = bytes / 2 MiB (up to 32 GiB).
class Array3DPath final : public CudaArrayPath {
 public:
  CUresult allocate(uint64_t bytes, uint64_t& obtained) override {
    constexpr size_t kWidth = 1024;
    constexpr size_t kHeight = 128;
    CUDA_ARRAY3D_DESCRIPTOR descriptor = {};
    descriptor.Width = kWidth;
    descriptor.Height = kHeight;
    descriptor.Depth = bytes / (kWidth * kHeight * kElementBytes);
    descriptor.Format = kFormat;
    descriptor.NumChannels = kChannels;
    CUarray array = nullptr;
    const CUresult result = CU(cuArray3DCreate)(&array, &descriptor);
    if (result != CUDA_SUCCESS) return result;
    arrays_.push_back(array);
    obtained = descriptor.Width * descriptor.Height * descriptor.Depth * kElementBytes;
    return CUDA_SUCCESS;
  }
};

// A 2D base level of `bytes` (rows of 16384 elements, up to 8 GiB) with its
// full chain of levels, each half the last in both dimensions down to 1 x 1:
// about a third more than the base, counted level by level.
class MipmapPath final : public AllocationPath {
 public:
  CUresult allocate(uint64_t bytes, uint64_t& obtained) override {
    constexpr size_t kWidth = 16384;
    CUDA_ARRAY3D_DESCRIPTOR descriptor = {};
    descriptor.Width = kWidth;
    descriptor.Height = bytes / (kWidth * kElementBytes);
    descriptor.Depth = 0;  // 2D
    descriptor.Format = kFormat;
    descriptor.NumChannels = kChannels;

    unsigned levels = 0;
    uint64_t chain_bytes = 0;
    for (size_t width = descriptor.Width, height = descriptor.Height;;
         width = std::max<size_t>(1, width / 2), height = std::max<size_t>(1, height / 2)) {
      ++levels;
      chain_bytes += width * height * kElementBytes;
      if (width == 1 && height == 1) break;
    }

    CUmipmappedArray mipmap = nullptr;
    const CUresult result = CU(cuMipmappedArrayCreate)(&mipmap, &descriptor, levels);
    if (result != CUDA_SUCCESS) return result;
    mipmaps_.push_back(mipmap);
    obtained = chain_bytes;
    return CUDA_SUCCESS;
  }

  CUresult release_all() override {
    while (!mipmaps_.empty()) {
      CU_CHECK(cuMipmappedArrayDestroy(mipmaps_.back()));
      mipmaps_.pop_back();
    }
    return CUDA_SUCCESS;
  }

 private:
  std::vector<CUmipmappedArray> mipmaps_;
};

}  // namespace

std::unique_ptr<AllocationPath> make_array_path() {
  return std::make_unique<ArrayPath>();
}
std::unique_ptr<AllocationPath> make_array3d_path() {
  return std::make_unique<Array3DPath>();
}
std::unique_ptr<AllocationPath> make_mipmap_path() {
  return std::make_unique<MipmapPath>();
}

}  // namespace workloads
