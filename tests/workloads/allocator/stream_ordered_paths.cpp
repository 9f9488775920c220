// Stream-ordered memory: cuMemAllocAsync from the device's default pool, and
// cuMemAllocFromPoolAsync from a pool created here. Both allocate and free on
// the default stream, so that --stream-mode decides which default stream that
// is (legacy, or the calling thread's).
#include <vector>

#include "allocation_path.h"
#include "cu_check.h"

namespace workloads {
namespace {

// 0 is the default stream; its meaning comes from the function variant.
constexpr CUstream kDefaultStream = nullptr;

class StreamOrderedPath : public AllocationPath {
 protected:
  // cuMemFreeAsync for everything, then a synchronisation: a pool hands memory
  // back to the device only at a synchronisation point, and keeps it even then
  // when its release threshold says so (the default pool's is 0: keep nothing).
  CUresult free_all_and_synchronize() {
    while (!pointers_.empty()) {
      CU_CHECK(cuMemFreeAsync(pointers_.back(), kDefaultStream));
      pointers_.pop_back();
    }
    CU_CHECK(cuStreamSynchronize(kDefaultStream));
    return CUDA_SUCCESS;
  }

  std::vector<CUdeviceptr> pointers_;
};

class AsyncPath final : public StreamOrderedPath {
 public:
  CUresult allocate(uint64_t bytes, uint64_t& obtained) override {
    CUdeviceptr pointer = 0;
    const CUresult result = CU(cuMemAllocAsync)(&pointer, bytes, kDefaultStream);
    if (result != CUDA_SUCCESS) return result;
    pointers_.push_back(pointer);
    obtained = bytes;
    return CUDA_SUCCESS;
  }

  CUresult release_all() override { return free_all_and_synchronize(); }
};

// A pool of our own, created on first use and destroyed on release, after
// cuMemPoolTrimTo has given its reserve back. The reserve left after the trim
// is reported: it must be 0.
class PoolPath final : public StreamOrderedPath {
 public:
  explicit PoolPath(CUdevice device) : device_(device) {}

  CUresult allocate(uint64_t bytes, uint64_t& obtained) override {
    if (!pool_) RETURN_IF_ERROR(create_pool());
    CUdeviceptr pointer = 0;
    const CUresult result = CU(cuMemAllocFromPoolAsync)(&pointer, bytes, pool_, kDefaultStream);
    if (result != CUDA_SUCCESS) return result;
    pointers_.push_back(pointer);
    obtained = bytes;
    return CUDA_SUCCESS;
  }

  CUresult release_all() override {
    RETURN_IF_ERROR(free_all_and_synchronize());
    if (!pool_) return CUDA_SUCCESS;
    CU_CHECK(cuMemPoolTrimTo(pool_, 0));
    cuuint64_t reserved = 0;
    CU_CHECK(cuMemPoolGetAttribute(pool_, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
    reserved_after_trim_ = reserved;
    CU_CHECK(cuMemPoolDestroy(pool_));
    pool_ = nullptr;
    return CUDA_SUCCESS;
  }

  uint64_t reserved_after_release() const override { return reserved_after_trim_; }

 private:
  CUresult create_pool() {
    CUmemPoolProps props = {};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = device_;
    CU_CHECK(cuMemPoolCreate(&pool_, &props));
    return CUDA_SUCCESS;
  }

  CUdevice device_;
  CUmemoryPool pool_ = nullptr;
  uint64_t reserved_after_trim_ = 0;
};

}  // namespace

std::unique_ptr<AllocationPath> make_async_path() {
  return std::make_unique<AsyncPath>();
}
std::unique_ptr<AllocationPath> make_pool_path(CUdevice device) {
  return std::make_unique<PoolPath>(device);
}

}  // namespace workloads
