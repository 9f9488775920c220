// Run with libgpulimit.so preloaded on the simulated driver (8 GiB devices
// whose contexts take no memory), as a tenant capped at 1 GiB: a physical
// allocation (cuMemCreate) stays charged for as long as the driver keeps it,
// which is until its last handle is released (cuMemRelease, once per
// cuMemCreate and per cuMemRetainAllocationHandle) and its last mapping is
// unmapped, in any order. What the device really holds is read by a process
// without the preload (device_truth.h) and must stay within the cap.
#include <cuda.h>
#include <gtest/gtest.h>

#include <vector>

#include "device_truth.h"
#include "preloaded_main.h"

namespace {

constexpr size_t kMiB = 1ull << 20;
constexpr size_t kGiB = 1ull << 30;

#define ASSERT_CU(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

using intercept_test::device_used;

class VirtualMemory : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_CU(cuInit(0));  // joins the tenant
    ASSERT_CU(cuDevicePrimaryCtxRetain(&context_, 0));
    ASSERT_CU(cuCtxSetCurrent(context_));
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = 0;
  }
  void TearDown() override {
    for (auto [base, size] : reservations_)
      cuMemAddressFree(base, size);
    EXPECT_EQ(tenant_free(), kGiB) << "everything freed, nothing charged";
    EXPECT_EQ(device_used(0), 0u) << "everything freed, nothing held";
  }

  size_t tenant_free() {
    size_t free = 0, total = 0;
    EXPECT_EQ(cuMemGetInfo_v2(&free, &total), CUDA_SUCCESS);
    EXPECT_EQ(total, kGiB);
    return free;
  }

  CUdeviceptr reserve(size_t size) {
    CUdeviceptr base = 0;
    EXPECT_EQ(cuMemAddressReserve(&base, size, 0, 0, 0), CUDA_SUCCESS);
    reservations_.push_back({base, size});
    return base;
  }

  // Maps `size` bytes of `handle` from `offset` at `at`, readable and writable.
  void map(CUdeviceptr at, size_t size, size_t offset, CUmemGenericAllocationHandle handle) {
    ASSERT_CU(cuMemMap(at, size, offset, handle, 0));
    CUmemAccessDesc access{};
    access.location = prop_.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ASSERT_CU(cuMemSetAccess(at, size, &access, 1));
  }

  CUcontext context_ = nullptr;
  CUmemAllocationProp prop_{};
  std::vector<std::pair<CUdeviceptr, size_t>> reservations_;
};

// The programming guide's pattern: create, map, release the handle at once
// and keep using the mapping. Ten of 512 MiB under a 1 GiB cap: two fit.
TEST_F(VirtualMemory, ReleasingAMappedHandleKeepsItsCharge) {
  std::vector<CUdeviceptr> mapped;
  CUresult last = CUDA_SUCCESS;
  for (int i = 0; i < 10 && last == CUDA_SUCCESS; ++i) {
    CUmemGenericAllocationHandle handle = 0;
    last = cuMemCreate(&handle, 512 * kMiB, &prop_, 0);
    if (last != CUDA_SUCCESS) break;
    const CUdeviceptr at = reserve(512 * kMiB);
    map(at, 512 * kMiB, 0, handle);
    ASSERT_CU(cuMemRelease(handle));
    ASSERT_CU(cuMemsetD8_v2(at, 0x5a, kMiB)) << "the mapping still reaches the memory";
    mapped.push_back(at);
    EXPECT_LE(device_used(0), kGiB) << "after " << i + 1 << " allocations";
  }
  EXPECT_EQ(last, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(mapped.size(), 2u);
  EXPECT_EQ(tenant_free(), 0u);
  EXPECT_EQ(device_used(0), kGiB);

  ASSERT_CU(cuMemUnmap(mapped[0], 512 * kMiB));
  EXPECT_EQ(tenant_free(), 512 * kMiB) << "the last mapping gone, the memory goes";
  EXPECT_EQ(device_used(0), 512 * kMiB);
  ASSERT_CU(cuMemUnmap(mapped[1], 512 * kMiB));
}

// A retained handle is one more reference: the memory outlives both the
// creating handle and the mapping until it is released too.
TEST_F(VirtualMemory, ARetainedHandleKeepsTheMemoryAfterTheUnmap) {
  CUmemGenericAllocationHandle handle = 0, retained = 0;
  ASSERT_CU(cuMemCreate(&handle, 512 * kMiB, &prop_, 0));
  const CUdeviceptr at = reserve(512 * kMiB);
  map(at, 512 * kMiB, 0, handle);
  ASSERT_CU(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(at + 4096)));
  ASSERT_CU(cuMemRelease(handle));
  ASSERT_CU(cuMemUnmap(at, 512 * kMiB));
  EXPECT_EQ(tenant_free(), 512 * kMiB);
  EXPECT_EQ(device_used(0), 512 * kMiB);

  // Still the tenant's: another 768 MiB does not fit beside it.
  CUmemGenericAllocationHandle other = 0;
  EXPECT_EQ(cuMemCreate(&other, 768 * kMiB, &prop_, 0), CUDA_ERROR_OUT_OF_MEMORY);

  ASSERT_CU(cuMemRelease(retained));
  EXPECT_EQ(tenant_free(), kGiB);
  EXPECT_EQ(device_used(0), 0u);
}

// Retained twice, released three times in all: only the last release frees.
TEST_F(VirtualMemory, EveryRetainIsOneMoreRelease) {
  CUmemGenericAllocationHandle handle = 0, first = 0, second = 0;
  ASSERT_CU(cuMemCreate(&handle, 256 * kMiB, &prop_, 0));
  const CUdeviceptr at = reserve(256 * kMiB);
  map(at, 256 * kMiB, 0, handle);
  ASSERT_CU(cuMemRetainAllocationHandle(&first, reinterpret_cast<void*>(at)));
  ASSERT_CU(cuMemRetainAllocationHandle(&second, reinterpret_cast<void*>(at)));
  ASSERT_CU(cuMemUnmap(at, 256 * kMiB));
  ASSERT_CU(cuMemRelease(handle));
  ASSERT_CU(cuMemRelease(first));
  EXPECT_EQ(tenant_free(), kGiB - 256 * kMiB);
  EXPECT_EQ(device_used(0), 256 * kMiB);
  ASSERT_CU(cuMemRelease(second));
  EXPECT_EQ(tenant_free(), kGiB);
}

// One handle mapped at two addresses, one of them at an offset into it: the
// memory lasts until the last of the mappings is gone.
TEST_F(VirtualMemory, EachMappingOfOneHandleHoldsTheMemory) {
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_CU(cuMemCreate(&handle, 512 * kMiB, &prop_, 0));
  const CUdeviceptr whole = reserve(512 * kMiB);
  const CUdeviceptr upper_half = reserve(256 * kMiB);
  map(whole, 512 * kMiB, 0, handle);
  map(upper_half, 256 * kMiB, 256 * kMiB, handle);
  ASSERT_CU(cuMemRelease(handle));
  EXPECT_EQ(tenant_free(), 512 * kMiB) << "charged once, however often mapped";

  ASSERT_CU(cuMemUnmap(whole, 512 * kMiB));
  EXPECT_EQ(tenant_free(), 512 * kMiB) << "still mapped at the offset";
  EXPECT_EQ(device_used(0), 512 * kMiB);
  ASSERT_CU(cuMemUnmap(upper_half, 256 * kMiB));
  EXPECT_EQ(tenant_free(), kGiB);
}

// cuMemUnmap of part of a mapping is refused by the driver, and changes
// nothing: the memory stays mapped and charged.
TEST_F(VirtualMemory, UnmappingPartOfAMappingChangesNothing) {
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_CU(cuMemCreate(&handle, 512 * kMiB, &prop_, 0));
  const CUdeviceptr at = reserve(512 * kMiB);
  map(at, 512 * kMiB, 0, handle);
  ASSERT_CU(cuMemRelease(handle));
  EXPECT_NE(cuMemUnmap(at, 256 * kMiB), CUDA_SUCCESS);
  EXPECT_NE(cuMemUnmap(at + 256 * kMiB, 256 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(tenant_free(), 512 * kMiB);
  EXPECT_EQ(device_used(0), 512 * kMiB);
  ASSERT_CU(cuMemsetD8_v2(at, 1, kMiB));
  ASSERT_CU(cuMemUnmap(at, 512 * kMiB));
}

// Releasing a handle again, or one that never was, is the driver's error and
// gives nothing back; unmapping what is not mapped neither.
TEST_F(VirtualMemory, ReleasingTwiceGivesNothingBack) {
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_CU(cuMemCreate(&handle, 512 * kMiB, &prop_, 0));
  const CUdeviceptr at = reserve(512 * kMiB);
  map(at, 512 * kMiB, 0, handle);
  ASSERT_CU(cuMemRelease(handle));
  EXPECT_NE(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_NE(cuMemUnmap(at + 512 * kMiB, 512 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(tenant_free(), 512 * kMiB);
  ASSERT_CU(cuMemUnmap(at, 512 * kMiB));
  EXPECT_NE(cuMemUnmap(at, 512 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(tenant_free(), kGiB);
}

// A hostile program maps a handle again after releasing it (undefined
// behaviour on the real driver; the simulator lets it): the second mapping
// holds the memory too and keeps it charged.
TEST_F(VirtualMemory, MappingAReleasedHandleAgainKeepsItCharged) {
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_CU(cuMemCreate(&handle, 512 * kMiB, &prop_, 0));
  const CUdeviceptr first = reserve(512 * kMiB);
  const CUdeviceptr second = reserve(512 * kMiB);
  map(first, 512 * kMiB, 0, handle);
  ASSERT_CU(cuMemRelease(handle));
  if (cuMemMap(second, 512 * kMiB, 0, handle, 0) != CUDA_SUCCESS)
    GTEST_SKIP() << "this driver refuses a released handle";
  ASSERT_CU(cuMemUnmap(first, 512 * kMiB));
  EXPECT_EQ(device_used(0), 512 * kMiB);
  EXPECT_EQ(tenant_free(), 512 * kMiB);
  ASSERT_CU(cuMemUnmap(second, 512 * kMiB));
}

// Without a mapping, the release is what frees (as before).
TEST_F(VirtualMemory, AnUnmappedAllocationGoesAtItsRelease) {
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_CU(cuMemCreate(&handle, kGiB, &prop_, 0));
  EXPECT_EQ(tenant_free(), 0u);
  ASSERT_CU(cuMemRelease(handle));
  EXPECT_EQ(tenant_free(), kGiB);
  EXPECT_EQ(device_used(0), 0u);
}

}  // namespace

// The test process is the tenant.
int main(int argc, char** argv) {
  return intercept_test::run_preloaded(argc, argv,
                                       {{"LD_PRELOAD", GPULIMIT_LIBRARY_PATH},
                                        {"GPULIMIT_MEM", "1G"},
                                        {"GPULIMIT_TENANT", "vmm-memory"},
                                        {"GPULIMIT_LEDGER_DIR", "$GPULIMIT_TEST_DIR"},
                                        {"FAKECUDA_DEVICES", "2"},
                                        {"FAKECUDA_MEM", "8G"},
                                        {"FAKECUDA_CTX_MEM", "0"}});
}
