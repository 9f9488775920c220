// Linear device memory: cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged,
// all given back with cuMemFree_v2.
#include <string>
#include <vector>

#include "allocation_path.h"
#include "cu_check.h"

namespace workloads {
namespace {

class DevicePointerPath : public AllocationPath {
 public:
  CUresult release_all() override {
    while (!pointers_.empty()) {
      CU_CHECK(cuMemFree(pointers_.back()));
      pointers_.pop_back();
    }
    return CUDA_SUCCESS;
  }

 protected:
  std::vector<CUdeviceptr> pointers_;
};

class LinearPath final : public DevicePointerPath {
 public:
  CUresult allocate(uint64_t bytes, uint64_t& obtained) override {
    CUdeviceptr pointer = 0;
    const CUresult result = CU(cuMemAlloc)(&pointer, bytes);
    if (result != CUDA_SUCCESS) return result;
    pointers_.push_back(pointer);
    obtained = bytes;
    return CUDA_SUCCESS;
  }
};

// Rows of 64 KiB: a multiple of every pitch alignment (at most 512 bytes so
// far), so the pitch normally equals the width and `obtained` equals `bytes`;
// the driver's pitch is what counts either way.
class PitchPath final : public DevicePointerPath {
 public:
  CUresult allocate(uint64_t bytes, uint64_t& obtained) override {
    constexpr size_t kRowBytes = 64 << 10;
    constexpr unsigned kElementBytes = 16;  // the widest element cuMemAllocPitch takes
    const size_t rows = bytes / kRowBytes;
    CUdeviceptr pointer = 0;
    size_t pitch = 0;
    const CUresult result = CU(cuMemAllocPitch)(&pointer, &pitch, kRowBytes, rows, kElementBytes);
    if (result != CUDA_SUCCESS) return result;
    pointers_.push_back(pointer);
    if (pitch < kRowBytes) {
      report_error("cuMemAllocPitch returned a pitch of " + std::to_string(pitch) +
                   " bytes for rows of " + std::to_string(kRowBytes));
      return CUDA_ERROR_INVALID_VALUE;
    }
    obtained = static_cast<uint64_t>(pitch) * rows;
    return CUDA_SUCCESS;
  }
};

// Attached globally, as cudaMallocManaged does by default. A real GPU backs
// managed memory only when it is touched, so its free memory need not drop.
class ManagedPath final : public DevicePointerPath {
 public:
  CUresult allocate(uint64_t bytes, uint64_t& obtained) override {
    CUdeviceptr pointer = 0;
    const CUresult result = CU(cuMemAllocManaged)(&pointer, bytes, CU_MEM_ATTACH_GLOBAL);
    if (result != CUDA_SUCCESS) return result;
    pointers_.push_back(pointer);
    obtained = bytes;
    return CUDA_SUCCESS;
  }
};

}  // namespace

std::unique_ptr<AllocationPath> make_linear_path() {
  return std::make_unique<LinearPath>();
}
std::unique_ptr<AllocationPath> make_pitch_path() {
  return std::make_unique<PitchPath>();
}
std::unique_ptr<AllocationPath> make_managed_path() {
  return std::make_unique<ManagedPath>();
}

}  // namespace workloads
