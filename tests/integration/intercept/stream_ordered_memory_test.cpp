// Run with libgpulimit.so preloaded on the simulated driver (two 8 GiB
// devices whose contexts take no memory), as a tenant capped at 1 GiB on
// device 1 only, with device 0's context current: stream-ordered memory is
// charged to the device it lands on (the stream's, the pool's), and a pool's
// reserve beyond its allocations (kept after frees, up to its release
// threshold) is charged while the driver says the pool holds it. What the
// device really holds is read by a process without the preload
// (device_truth.h) and must stay within the cap.
#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "device_truth.h"
#include "preloaded_main.h"

namespace {

constexpr size_t kMiB = 1ull << 20;
constexpr size_t kGiB = 1ull << 30;

#define ASSERT_CU(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

using intercept_test::device_used;

class StreamOrderedMemory : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));  // joins the tenant
    for (int device = 0; device < 2; ++device)
      ASSERT_CU(cuDevicePrimaryCtxRetain(&contexts_[device], device));
    ASSERT_CU(cuCtxSetCurrent(contexts_[1]));
    ASSERT_CU(cuStreamCreate(&stream_on_1_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(cuCtxSetCurrent(contexts_[0]));
    ASSERT_CU(cuDeviceGetDefaultMemPool(&default_pool_1_, 1));
  }
  void TearDown() override {
    cuStreamSynchronize(stream_on_1_);
    std::uint64_t release_all = 0;  // the default threshold
    cuMemPoolSetAttribute(default_pool_1_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &release_all);
    cuMemPoolTrimTo(default_pool_1_, 0);
    cuStreamDestroy_v2(stream_on_1_);
    EXPECT_EQ(tenant_free_on_1(), kGiB) << "everything freed, nothing charged";
    EXPECT_EQ(device_used(1), 0u) << "everything freed, nothing held";
  }

  // What the tenant has left on device 1, as cuMemGetInfo reports it there.
  size_t tenant_free_on_1() {
    CUcontext current = nullptr;
    cuCtxGetCurrent(&current);
    cuCtxSetCurrent(contexts_[1]);
    size_t free = 0, total = 0;
    EXPECT_EQ(cuMemGetInfo_v2(&free, &total), CUDA_SUCCESS);
    EXPECT_EQ(total, kGiB);
    cuCtxSetCurrent(current);
    return free;
  }

  CUmemoryPool pool_on_1() {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 1;
    CUmemoryPool pool = nullptr;
    EXPECT_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
    return pool;
  }

  // Allocates 512 MiB at a time with `allocate` until it fails (at most
  // ten times), checking after each that device 1 holds no more than the
  // cap; returns what was allocated, and the failure in `last`.
  template <typename Allocate>
  std::vector<CUdeviceptr> allocate_until_refused(Allocate&& allocate, CUresult* last) {
    std::vector<CUdeviceptr> allocated;
    *last = CUDA_SUCCESS;
    for (int i = 0; i < 10; ++i) {
      CUdeviceptr ptr = 0;
      *last = allocate(&ptr);
      if (*last != CUDA_SUCCESS) break;
      allocated.push_back(ptr);
      EXPECT_LE(device_used(1), kGiB) << "after " << i + 1 << " allocations";
    }
    return allocated;
  }

  CUcontext contexts_[2] = {};
  CUstream stream_on_1_ = nullptr;
  CUmemoryPool default_pool_1_ = nullptr;
};

TEST_F(StreamOrderedMemory, AllocatingOnAStreamOfAnotherDeviceChargesThatDevice) {
  CUresult last = CUDA_SUCCESS;
  const std::vector<CUdeviceptr> allocated = allocate_until_refused(
      [&](CUdeviceptr* ptr) { return cuMemAllocAsync(ptr, 512 * kMiB, stream_on_1_); }, &last);
  EXPECT_EQ(last, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(allocated.size(), 2u);
  EXPECT_EQ(tenant_free_on_1(), 0u);
  for (CUdeviceptr ptr : allocated)
    ASSERT_CU(cuMemFreeAsync(ptr, stream_on_1_));
  ASSERT_CU(cuStreamSynchronize(stream_on_1_));
  EXPECT_EQ(device_used(1), 0u) << "the default pool releases at the synchronisation";
  EXPECT_EQ(tenant_free_on_1(), kGiB);
}

TEST_F(StreamOrderedMemory, AllocatingFromAPoolOfAnotherDeviceChargesThatDevice) {
  CUmemoryPool pool = pool_on_1();
  CUresult last = CUDA_SUCCESS;
  // The legacy default stream, of the current context (device 0).
  const std::vector<CUdeviceptr> allocated = allocate_until_refused(
      [&](CUdeviceptr* ptr) { return cuMemAllocFromPoolAsync(ptr, 512 * kMiB, pool, nullptr); },
      &last);
  EXPECT_EQ(last, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(allocated.size(), 2u);
  EXPECT_EQ(tenant_free_on_1(), 0u);
  for (CUdeviceptr ptr : allocated)
    ASSERT_CU(cuMemFreeAsync(ptr, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemPoolDestroy(pool));
}

TEST_F(StreamOrderedMemory, AllocatingFromTheDefaultPoolOfAnotherDeviceChargesThatDevice) {
  CUresult last = CUDA_SUCCESS;
  const std::vector<CUdeviceptr> allocated = allocate_until_refused(
      [&](CUdeviceptr* ptr) {
        return cuMemAllocFromPoolAsync_ptsz(ptr, 512 * kMiB, default_pool_1_, nullptr);
      },
      &last);
  EXPECT_EQ(last, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(allocated.size(), 2u);
  for (CUdeviceptr ptr : allocated)
    ASSERT_CU(cuMemFree_v2(ptr));  // cuMemFree frees stream-ordered memory too
  ASSERT_CU(cuCtxSetCurrent(contexts_[1]));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuCtxSetCurrent(contexts_[0]));
}

// A pool told never to give memory back keeps what was freed: the tenant is
// charged for it while the pool holds it, and gets it back at the trim.
TEST_F(StreamOrderedMemory, WhatAPoolKeepsAfterFreesStaysCharged) {
  CUmemoryPool pool = pool_on_1();
  std::uint64_t never = UINT64_MAX;
  ASSERT_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &never));
  CUdeviceptr kept = 0;
  ASSERT_CU(cuMemAllocFromPoolAsync(&kept, 768 * kMiB, pool, stream_on_1_));
  ASSERT_CU(cuMemFreeAsync(kept, stream_on_1_));
  ASSERT_CU(cuStreamSynchronize(stream_on_1_));
  EXPECT_EQ(device_used(1), 768 * kMiB) << "the pool keeps it";
  EXPECT_EQ(tenant_free_on_1(), 256 * kMiB);

  // Beside it, another 512 MiB would exceed the cap on the device.
  ASSERT_CU(cuCtxSetCurrent(contexts_[1]));
  CUdeviceptr linear = 0;
  EXPECT_EQ(cuMemAlloc_v2(&linear, 512 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_LE(device_used(1), kGiB);
  ASSERT_CU(cuCtxSetCurrent(contexts_[0]));

  // The pool serves it again from what it keeps, at no further charge.
  CUdeviceptr again = 0;
  ASSERT_CU(cuMemAllocFromPoolAsync(&again, 768 * kMiB, pool, stream_on_1_));
  EXPECT_EQ(tenant_free_on_1(), 256 * kMiB);
  ASSERT_CU(cuMemFreeAsync(again, stream_on_1_));
  ASSERT_CU(cuStreamSynchronize(stream_on_1_));

  ASSERT_CU(cuMemPoolTrimTo(pool, 0));
  EXPECT_EQ(device_used(1), 0u);
  EXPECT_EQ(tenant_free_on_1(), kGiB);
  ASSERT_CU(cuMemPoolDestroy(pool));
}

// The same through the device's default pool, whose threshold any program
// may raise, and cuMemAllocAsync.
TEST_F(StreamOrderedMemory, RaisingTheDefaultPoolsThresholdKeepsItsMemoryCharged) {
  std::uint64_t never = UINT64_MAX;
  ASSERT_CU(cuMemPoolSetAttribute(default_pool_1_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &never));
  for (int round = 0; round < 3; ++round) {
    CUdeviceptr ptr = 0;
    ASSERT_CU(cuMemAllocAsync(&ptr, 768 * kMiB, stream_on_1_));
    ASSERT_CU(cuMemFreeAsync(ptr, stream_on_1_));
    ASSERT_CU(cuStreamSynchronize(stream_on_1_));
    ASSERT_CU(cuCtxSetCurrent(contexts_[1]));
    CUdeviceptr linear = 0;
    EXPECT_EQ(cuMemAlloc_v2(&linear, 512 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_CU(cuCtxSetCurrent(contexts_[0]));
    EXPECT_LE(device_used(1), kGiB);
  }
  ASSERT_CU(cuMemPoolTrimTo(default_pool_1_, 0));
  EXPECT_EQ(tenant_free_on_1(), kGiB);
}

// With the default threshold (0) the pool gives freed memory back at the
// synchronisation: the cap is free again for any other allocation.
TEST_F(StreamOrderedMemory, WhatThePoolGaveBackAtASynchronisationIsFreeAgain) {
  CUdeviceptr ptr = 0;
  ASSERT_CU(cuMemAllocAsync(&ptr, 768 * kMiB, stream_on_1_));
  ASSERT_CU(cuMemFreeAsync(ptr, stream_on_1_));
  ASSERT_CU(cuStreamSynchronize(stream_on_1_));
  ASSERT_CU(cuCtxSetCurrent(contexts_[1]));
  CUdeviceptr linear = 0;
  ASSERT_CU(cuMemAlloc_v2(&linear, 768 * kMiB));
  EXPECT_EQ(tenant_free_on_1(), 256 * kMiB);
  ASSERT_CU(cuMemFree_v2(linear));
  ASSERT_CU(cuCtxSetCurrent(contexts_[0]));
}

// A created pool made device 1's current pool: cuMemAllocAsync on device
// 1's stream allocates from it, and its reserve is charged like any other.
TEST_F(StreamOrderedMemory, ACreatedPoolMadeCurrentIsChargedToItsDevice) {
  CUmemoryPool pool = pool_on_1();
  std::uint64_t never = UINT64_MAX;
  ASSERT_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &never));
  ASSERT_CU(cuDeviceSetMemPool(1, pool));
  CUresult last = CUDA_SUCCESS;
  const std::vector<CUdeviceptr> allocated = allocate_until_refused(
      [&](CUdeviceptr* ptr) { return cuMemAllocAsync_ptsz(ptr, 512 * kMiB, stream_on_1_); }, &last);
  EXPECT_EQ(last, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(allocated.size(), 2u);
  for (CUdeviceptr ptr : allocated)
    ASSERT_CU(cuMemFreeAsync_ptsz(ptr, stream_on_1_));
  ASSERT_CU(cuStreamSynchronize(stream_on_1_));
  EXPECT_EQ(tenant_free_on_1(), 0u) << "the pool keeps it all";
  EXPECT_EQ(device_used(1), kGiB);
  ASSERT_CU(cuDeviceSetMemPool(1, default_pool_1_));
  ASSERT_CU(cuMemPoolDestroy(pool));
  EXPECT_EQ(tenant_free_on_1(), kGiB);
}

// A pool destroyed with an allocation outstanding: the allocation stays
// charged until it is freed.
TEST_F(StreamOrderedMemory, ADestroyedPoolsAllocationStaysChargedUntilFreed) {
  CUmemoryPool pool = pool_on_1();
  CUdeviceptr ptr = 0;
  ASSERT_CU(cuMemAllocFromPoolAsync(&ptr, 512 * kMiB, pool, stream_on_1_));
  ASSERT_CU(cuMemPoolDestroy(pool));
  EXPECT_EQ(tenant_free_on_1(), 512 * kMiB);
  EXPECT_EQ(device_used(1), 512 * kMiB);
  ASSERT_CU(cuMemFreeAsync(ptr, stream_on_1_));
  ASSERT_CU(cuStreamSynchronize(stream_on_1_));
}

}  // namespace

// The test process is the tenant.
int main(int argc, char** argv) {
  return intercept_test::run_preloaded(argc, argv,
                                       {{"LD_PRELOAD", GPULIMIT_LIBRARY_PATH},
                                        {"GPULIMIT_DEVICE_MEM", "1=1G"},
                                        {"GPULIMIT_TENANT", "stream-ordered-memory"},
                                        {"GPULIMIT_LEDGER_DIR", "$GPULIMIT_TEST_DIR"},
                                        {"FAKECUDA_DEVICES", "2"},
                                        {"FAKECUDA_MEM", "8G"},
                                        {"FAKECUDA_CTX_MEM", "0"}});
}
