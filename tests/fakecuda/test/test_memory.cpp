// Every allocation path takes device memory from the shared pool, in 2 MiB
// pages, and every free gives back exactly what was taken.
#include <cstring>
#include <vector>

#include "support.h"

namespace fakecuda::test {
namespace {

constexpr size_t kMiB = 1ull << 20;
constexpr size_t kGiB = 1ull << 30;

class Memory : public ::testing::Test {
 protected:
  void SetUp() override {
    init_primary(0);
    baseline_ = free_memory();
  }
  size_t taken() { return baseline_ - free_memory(); }
  size_t baseline_ = 0;
};

TEST_F(Memory, LinearAllocationsArePagedAndReturned) {
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAlloc_v2(&a, 1));
  EXPECT_EQ(taken(), 2 * kMiB);
  ASSERT_CU(cuMemAlloc_v2(&b, 3 * kMiB));
  EXPECT_EQ(taken(), 6 * kMiB);
  ASSERT_CU(cuMemFree_v2(a));
  ASSERT_CU(cuMemFree_v2(b));
  EXPECT_EQ(taken(), 0u);
  EXPECT_EQ(cuMemFree_v2(b), CUDA_ERROR_INVALID_VALUE) << "double free";
  EXPECT_EQ(cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAlloc_v2(nullptr, 1), CUDA_ERROR_INVALID_VALUE);
}

// As the real driver: cudaFree(NULL), which cuBLAS calls, reaches the driver.
TEST_F(Memory, FreeingNullSucceeds) {
  EXPECT_CU(cuMemFree_v2(0));
  EXPECT_CU(cuMemFree(0));
  EXPECT_EQ(taken(), 0u);
}

TEST_F(Memory, OutOfMemoryChangesNothing) {
  CUdeviceptr big = 0, p = 0;
  ASSERT_CU(cuMemAlloc_v2(&big, baseline_ - 4 * kMiB));
  EXPECT_EQ(cuMemAlloc_v2(&p, 8 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(free_memory(), 4 * kMiB);
  ASSERT_CU(cuMemAlloc_v2(&p, 4 * kMiB));
  EXPECT_EQ(free_memory(), 0u);
  ASSERT_CU(cuMemFree_v2(big));
  ASSERT_CU(cuMemFree_v2(p));
}

TEST_F(Memory, DeviceMemoryHoldsData) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, 4096));
  std::vector<unsigned> in(1024, 7), out(1024, 0);
  ASSERT_CU(cuMemsetD32_v2(p, 0xabcd, 1024));
  ASSERT_CU(cuMemcpyDtoH_v2(out.data(), p, 4096));
  EXPECT_EQ(out[1023], 0xabcdu);
  ASSERT_CU(cuMemcpyHtoD_v2(p, in.data(), 4096));
  ASSERT_CU(cuMemcpyDtoH_v2(out.data(), p, 4096));
  EXPECT_EQ(out, in);
  EXPECT_EQ(cuMemsetD32_v2(p + 4096, 0, 1024), CUDA_ERROR_INVALID_VALUE) << "past the allocation";
  ASSERT_CU(cuMemFree_v2(p));
}

TEST_F(Memory, PitchManagedAndLegacyPaths) {
  CUdeviceptr pitched = 0, managed = 0;
  CUdeviceptr_v1 small = 0;
  size_t pitch = 0;
  ASSERT_CU(cuMemAllocPitch_v2(&pitched, &pitch, 1000, 3000, 4));
  EXPECT_EQ(pitch, 1024u);
  EXPECT_EQ(taken(), 4 * kMiB);  // 1024 * 3000 bytes, in pages
  ASSERT_CU(cuMemAllocManaged(&managed, 5 * kMiB, CU_MEM_ATTACH_GLOBAL));
  EXPECT_EQ(taken(), 10 * kMiB);
  ASSERT_CU(cuMemAlloc(&small, 1 << 20));
  EXPECT_EQ(taken(), 12 * kMiB);
  ASSERT_CU(cuMemFree(small));
  ASSERT_CU(cuMemFree_v2(pitched));
  ASSERT_CU(cuMemFree_v2(managed));
  EXPECT_EQ(taken(), 0u);
  EXPECT_EQ(cuMemAllocPitch_v2(&pitched, &pitch, 10, 10, 3), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Memory, HostMemoryIsNotDeviceMemory) {
  void* host = nullptr;
  ASSERT_CU(cuMemAllocHost_v2(&host, 64 * kMiB));
  EXPECT_EQ(taken(), 0u);
  std::memset(host, 1, 4096);
  CUdeviceptr dev = 0;
  ASSERT_CU(cuMemHostGetDevicePointer_v2(&dev, host, 0));
  EXPECT_EQ(reinterpret_cast<void*>(dev), host);
  ASSERT_CU(cuMemFreeHost(host));
}

TEST_F(Memory, AddressRangeAndPointerAttributes) {
  CUdeviceptr p = 0, base = 0;
  size_t size = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, 10000));
  ASSERT_CU(cuMemGetAddressRange_v2(&base, &size, p + 5000));
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 10000u);
  int ordinal = -1;
  ASSERT_CU(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  EXPECT_EQ(ordinal, 0);
  ASSERT_CU(cuMemFree_v2(p));
  EXPECT_EQ(cuMemGetAddressRange_v2(&base, &size, p), CUDA_ERROR_NOT_FOUND);
}

TEST_F(Memory, StreamOrderedAllocationsGoBackToThePoolThenTheDevice) {
  CUstream stream = nullptr;
  ASSERT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAllocAsync(&p, 3 * kMiB, stream));
  EXPECT_EQ(taken(), 4 * kMiB);
  CUmemoryPool pool = nullptr;
  ASSERT_CU(cuDeviceGetMemPool(&pool, 0));
  cuuint64_t reserved = 0, used = 0;
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(used, 3 * kMiB);
  ASSERT_CU(cuMemFreeAsync(p, stream));
  ASSERT_CU(cuStreamSynchronize(stream));
  // Release threshold 0: a synchronisation gives everything back.
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  EXPECT_EQ(reserved, 0u);
  EXPECT_EQ(taken(), 0u);

  // With a threshold the pool keeps what it holds, until trimmed.
  cuuint64_t threshold = 64 * kMiB;
  ASSERT_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  ASSERT_CU(cuMemAllocAsync(&p, 8 * kMiB, stream));
  ASSERT_CU(cuMemFreeAsync(p, stream));
  ASSERT_CU(cuStreamSynchronize(stream));
  EXPECT_EQ(taken(), 8 * kMiB);
  ASSERT_CU(cuMemPoolTrimTo(pool, 0));
  EXPECT_EQ(taken(), 0u);
  ASSERT_CU(cuStreamDestroy_v2(stream));
}

// UINT64_MAX is how PyTorch's cudaMallocAsync backend says "never release":
// the pool keeps what it reserved, and what is in use stays charged.
TEST_F(Memory, APoolThatNeverReleasesKeepsItsMemoryAcrossSynchronisation) {
  CUmemoryPool pool = nullptr;
  ASSERT_CU(cuDeviceGetMemPool(&pool, 0));
  cuuint64_t never = UINT64_MAX;
  ASSERT_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &never));
  CUdeviceptr held = 0, freed = 0;
  ASSERT_CU(cuMemAllocAsync(&held, 6 * kMiB, nullptr));
  ASSERT_CU(cuMemAllocAsync(&freed, 4 * kMiB, nullptr));
  ASSERT_CU(cuMemFreeAsync(freed, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(taken(), 10 * kMiB);
  cuuint64_t reserved = 0;
  ASSERT_CU(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  EXPECT_EQ(reserved, 10 * kMiB);
  // A trim gives back what is not in use, never what is.
  ASSERT_CU(cuMemPoolTrimTo(pool, 0));
  EXPECT_EQ(taken(), 6 * kMiB);
  ASSERT_CU(cuMemFreeAsync(held, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuMemPoolTrimTo(pool, 0));
  EXPECT_EQ(taken(), 0u);
}

TEST_F(Memory, ExplicitPools) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  ASSERT_CU(cuMemPoolCreate(&pool, &props));
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAllocFromPoolAsync(&p, kMiB, pool, nullptr));
  EXPECT_EQ(taken(), 2 * kMiB);
  ASSERT_CU(cuMemFreeAsync(p, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(taken(), 0u);
  ASSERT_CU(cuMemPoolDestroy(pool));
  EXPECT_EQ(cuMemAllocFromPoolAsync(&p, kMiB, pool, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Memory, StreamOrderedOutOfMemory) {
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAllocAsync(&p, 8 * kGiB, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(taken(), 0u);
}

TEST_F(Memory, VirtualMemoryChargesPhysicalAllocationsOnly) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t granularity = 0;
  ASSERT_CU(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  ASSERT_EQ(granularity, 2 * kMiB);

  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, 64 * kMiB, 0, 0, 0));
  EXPECT_EQ(taken(), 0u) << "address space is not memory";
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_CU(cuMemCreate(&handle, 4 * kMiB, &prop, 0));
  EXPECT_EQ(taken(), 4 * kMiB);
  ASSERT_CU(cuMemMap(va, 4 * kMiB, 0, handle, 0));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_CU(cuMemSetAccess(va, 4 * kMiB, &access, 1));
  const unsigned value = 0x5eed;
  unsigned back = 0;
  ASSERT_CU(cuMemcpyHtoD_v2(va + kMiB, &value, sizeof(value)));
  ASSERT_CU(cuMemcpyDtoH_v2(&back, va + kMiB, sizeof(back)));
  EXPECT_EQ(back, value);

  // Released while mapped: the memory stays until the mapping goes.
  ASSERT_CU(cuMemRelease(handle));
  EXPECT_EQ(taken(), 4 * kMiB);
  ASSERT_CU(cuMemUnmap(va, 4 * kMiB));
  EXPECT_EQ(taken(), 0u);
  ASSERT_CU(cuMemAddressFree(va, 64 * kMiB));
  EXPECT_EQ(cuMemCreate(&handle, kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE) << "not a granule";
}

TEST_F(Memory, VirtualMemoryNeedsNoContextAndUsesThePropertysDevice) {
  CUcontext ctx = nullptr;
  ASSERT_CU(cuCtxPopCurrent_v2(&ctx));
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_CU(cuMemCreate(&handle, 16 * kMiB, &prop, 0));
  ASSERT_CU(cuCtxPushCurrent_v2(ctx));
  EXPECT_EQ(taken(), 0u) << "device 1 pays, not device 0";
  ASSERT_CU(cuMemRelease(handle));
}

TEST_F(Memory, ArraysAndMipmaps) {
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = 1024;
  desc.Height = 1024;
  desc.Depth = 4;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 1;
  CUarray array = nullptr;
  ASSERT_CU(cuArray3DCreate_v2(&array, &desc));
  EXPECT_EQ(taken(), 16 * kMiB);
  CUDA_ARRAY_DESCRIPTOR flat{};
  flat.Width = 1000;
  flat.Height = 1000;
  flat.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  flat.NumChannels = 4;
  CUarray array2d = nullptr;
  ASSERT_CU(cuArrayCreate_v2(&array2d, &flat));
  EXPECT_EQ(taken(), 20 * kMiB);
  CUmipmappedArray mipmap = nullptr;
  desc.Depth = 0;
  ASSERT_CU(cuMipmappedArrayCreate(&mipmap, &desc, 3));  // 4 + 1 + 0.25 MiB
  EXPECT_EQ(taken(), 26 * kMiB);
  CUarray level = nullptr;
  ASSERT_CU(cuMipmappedArrayGetLevel(&level, mipmap, 2));
  EXPECT_EQ(cuArrayDestroy(level), CUDA_ERROR_INVALID_HANDLE) << "levels belong to the mipmap";
  ASSERT_CU(cuMipmappedArrayDestroy(mipmap));
  ASSERT_CU(cuArrayDestroy(array));
  ASSERT_CU(cuArrayDestroy(array2d));
  EXPECT_EQ(taken(), 0u);
  desc.NumChannels = 3;
  EXPECT_EQ(cuArray3DCreate_v2(&array, &desc), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Memory, ModulesTakeDeviceMemory) {
  const char* ptx =
      ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\n ret;\n}\n";
  CUmodule module = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, ptx));
  EXPECT_EQ(taken(), 2 * kMiB);
  CUfunction f = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&f, module, "missing"), CUDA_ERROR_NOT_FOUND);
  ASSERT_CU(cuModuleGetFunction(&f, module, "k"));
  ASSERT_CU(cuModuleUnload(module));
  EXPECT_EQ(taken(), 0u);
  EXPECT_EQ(cuModuleLoadData(&module, "not ptx"), CUDA_ERROR_INVALID_IMAGE);
}

}  // namespace
}  // namespace fakecuda::test
