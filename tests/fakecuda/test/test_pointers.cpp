// Pointer attributes of every kind of memory, and of pointers the driver
// does not know.
#include <vector>

#include "support.h"

namespace fakecuda::test {
namespace {

constexpr size_t kMiB = 1ull << 20;

template <typename T>
T attribute(CUpointer_attribute a, CUdeviceptr p) {
  T value{};
  EXPECT_CU(cuPointerGetAttribute(&value, a, p)) << "attribute " << a;
  return value;
}

TEST(Pointers, LinearMemory) {
  CUcontext ctx = init_primary(0);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, 3 * kMiB));
  const CUdeviceptr inside = p + kMiB + 5;
  EXPECT_EQ(attribute<CUcontext>(CU_POINTER_ATTRIBUTE_CONTEXT, inside), ctx);
  EXPECT_EQ(attribute<unsigned>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inside), CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, inside), inside);
  void* host = nullptr;
  EXPECT_EQ(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, inside),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_IS_MANAGED, inside), 0);
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, inside), 0);
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, inside), 1);
  EXPECT_EQ(attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside), p);
  EXPECT_EQ(attribute<size_t>(CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside), 3 * kMiB);
  EXPECT_EQ(attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, inside), p);
  EXPECT_EQ(attribute<size_t>(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, inside), 3 * kMiB);
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_MAPPED, inside), 1);
  EXPECT_EQ(attribute<unsigned long long>(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, inside),
            CU_MEM_HANDLE_TYPE_NONE);
  EXPECT_EQ(attribute<unsigned>(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, inside),
            CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(attribute<CUmemoryPool>(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, inside), nullptr);
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE, inside), 0);
  EXPECT_EQ(cuPointerGetAttribute(&host, static_cast<CUpointer_attribute>(99), inside),
            CUDA_ERROR_INVALID_VALUE);

  // Buffer ids are unique in the process, never reused.
  const auto id = attribute<unsigned long long>(CU_POINTER_ATTRIBUTE_BUFFER_ID, p);
  EXPECT_NE(id, 0u);
  EXPECT_EQ(attribute<unsigned long long>(CU_POINTER_ATTRIBUTE_BUFFER_ID, inside), id);
  ASSERT_CU(cuMemFree_v2(p));
  CUdeviceptr q = 0;
  ASSERT_CU(cuMemAlloc_v2(&q, 3 * kMiB));
  EXPECT_NE(attribute<unsigned long long>(CU_POINTER_ATTRIBUTE_BUFFER_ID, q), id);
  ASSERT_CU(cuMemFree_v2(q));
}

TEST(Pointers, SyncMemopsIsSetAndRead) {
  init_primary(0);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, kMiB));
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p), 0);
  const unsigned on = 1;
  ASSERT_CU(cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p), 1);
  EXPECT_EQ(cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_BUFFER_ID, p),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuPointerSetAttribute(&on, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, 0x10),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuPointerSetAttribute(nullptr, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFree_v2(p));
}

TEST(Pointers, ManagedMemory) {
  init_primary(0);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAllocManaged(&p, kMiB, CU_MEM_ATTACH_GLOBAL));
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_IS_MANAGED, p), 1);
  EXPECT_EQ(attribute<unsigned>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(attribute<void*>(CU_POINTER_ATTRIBUTE_HOST_POINTER, p), reinterpret_cast<void*>(p));
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p), 0);
  ASSERT_CU(cuMemFree_v2(p));
}

TEST(Pointers, PoolMemoryNamesItsPool) {
  init_primary(0);
  CUmemoryPool pool = nullptr;
  ASSERT_CU(cuDeviceGetDefaultMemPool(&pool, 0));
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAllocAsync(&p, kMiB, nullptr));
  EXPECT_EQ(attribute<CUmemoryPool>(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p), pool);
  EXPECT_EQ(attribute<unsigned>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p), 0);
  ASSERT_CU(cuMemFreeAsync(p, nullptr));
  ASSERT_CU(cuCtxSynchronize());
}

TEST(Pointers, HostMemoryAllocatedAndRegistered) {
  CUcontext ctx = init_primary(0);
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, kMiB, CU_MEMHOSTALLOC_DEVICEMAP));
  const auto p = reinterpret_cast<CUdeviceptr>(pinned);
  EXPECT_EQ(attribute<unsigned>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CU_MEMORYTYPE_HOST);
  EXPECT_EQ(attribute<void*>(CU_POINTER_ATTRIBUTE_HOST_POINTER, p + 8),
            static_cast<char*>(pinned) + 8);
  EXPECT_EQ(attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p), p);
  EXPECT_EQ(attribute<CUcontext>(CU_POINTER_ATTRIBUTE_CONTEXT, p), ctx);
  unsigned flags = 0;
  ASSERT_CU(cuMemHostGetFlags(&flags, pinned));
  EXPECT_EQ(flags, unsigned{CU_MEMHOSTALLOC_DEVICEMAP});

  std::vector<char> user(64 * 1024);
  ASSERT_CU(cuMemHostRegister_v2(user.data(), user.size(), CU_MEMHOSTREGISTER_PORTABLE));
  const auto r = reinterpret_cast<CUdeviceptr>(user.data());
  EXPECT_EQ(attribute<unsigned>(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, r + 100), CU_MEMORYTYPE_HOST);
  EXPECT_EQ(attribute<size_t>(CU_POINTER_ATTRIBUTE_RANGE_SIZE, r + 100), user.size());
  EXPECT_EQ(cuMemHostGetFlags(&flags, user.data()), CUDA_ERROR_INVALID_VALUE)
      << "registered memory has no allocation flags";
  CUdeviceptr mapped = 0;
  ASSERT_CU(cuMemHostGetDevicePointer_v2(&mapped, user.data() + 16, 0));
  EXPECT_EQ(mapped, r + 16);
  EXPECT_EQ(cuMemHostRegister_v2(user.data() + 4096, 4096, 0),
            CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(cuMemHostRegister_v2(user.data(), user.size(), 0x40), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemHostUnregister(user.data()));
  EXPECT_EQ(cuMemHostUnregister(user.data()), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cuMemHostRegister_v2(user.data(), user.size(), CU_MEMHOSTREGISTER_READ_ONLY),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cuMemHostAlloc(&pinned, kMiB, 0x80), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFreeHost(pinned));
}

TEST(Pointers, VmmMappingsReportTheirReservationAndMapping) {
  init_primary(0);
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  const size_t page = 2 * kMiB;
  CUmemGenericAllocationHandle phys = 0;
  ASSERT_CU(cuMemCreate(&phys, page, &prop, 0));
  CUdeviceptr base = 0;
  ASSERT_CU(cuMemAddressReserve(&base, 4 * page, 0, 0, 0));
  const CUdeviceptr at = base + page;
  ASSERT_CU(cuMemMap(at, page, 0, phys, 0));
  CUmemAccessDesc access{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  EXPECT_EQ(attribute<unsigned>(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, at + 1),
            CU_MEM_ACCESS_FLAGS_PROT_NONE);
  ASSERT_CU(cuMemSetAccess(at, page, &access, 1));

  EXPECT_EQ(attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, at + 1), base);
  EXPECT_EQ(attribute<size_t>(CU_POINTER_ATTRIBUTE_RANGE_SIZE, at + 1), 4 * page);
  EXPECT_EQ(attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, at + 1), at);
  EXPECT_EQ(attribute<size_t>(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, at + 1), page);
  EXPECT_EQ(attribute<unsigned long long>(CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, at),
            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  EXPECT_EQ(attribute<unsigned>(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, at),
            CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_MAPPED, at), 1);
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, at), 0);
  EXPECT_NE(attribute<unsigned long long>(CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, at), 0u);
  // Reserved but not mapped: only the range is known.
  EXPECT_EQ(attribute<int>(CU_POINTER_ATTRIBUTE_MAPPED, base), 0);
  EXPECT_EQ(attribute<CUdeviceptr>(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, base + 3), base);
  unsigned type = 0;
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, base),
            CUDA_ERROR_INVALID_VALUE);

  ASSERT_CU(cuMemUnmap(at, page));
  ASSERT_CU(cuMemAddressFree(base, 4 * page));
  ASSERT_CU(cuMemRelease(phys));
}

TEST(Pointers, AnUnknownPointerIsRefusedAloneAndDefaultedTogether) {
  init_primary(0);
  int stack_value = 0;
  const auto unknown = reinterpret_cast<CUdeviceptr>(&stack_value);
  unsigned type = 7;
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, unknown),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuPointerGetAttribute(nullptr, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, unknown),
            CUDA_ERROR_INVALID_VALUE);

  // As the runtime's cudaPointerGetAttributes asks.
  CUcontext ctx = reinterpret_cast<CUcontext>(1);
  void* device_pointer = &type;
  void* host_pointer = &type;
  int managed = 5, ordinal = 5;
  unsigned long long id = 5;
  CUpointer_attribute attributes[] = {
      CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_CONTEXT,
      CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER,
      CU_POINTER_ATTRIBUTE_IS_MANAGED,     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
      CU_POINTER_ATTRIBUTE_BUFFER_ID};
  void* data[] = {&type, &ctx, &device_pointer, &host_pointer, &managed, &ordinal, &id};
  ASSERT_CU(cuPointerGetAttributes(7, attributes, data, unknown));
  EXPECT_EQ(type, 0u) << "no memory type: the runtime's cudaMemoryTypeUnregistered";
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(device_pointer, nullptr);
  EXPECT_EQ(host_pointer, nullptr);
  EXPECT_EQ(managed, 0);
  EXPECT_EQ(ordinal, CU_DEVICE_INVALID);
  EXPECT_EQ(id, 0u);

  // Device memory: each attribute answered, the host pointer NULL.
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, kMiB));
  ASSERT_CU(cuPointerGetAttributes(7, attributes, data, p));
  EXPECT_EQ(type, unsigned{CU_MEMORYTYPE_DEVICE});
  EXPECT_NE(ctx, nullptr);
  EXPECT_EQ(reinterpret_cast<CUdeviceptr>(device_pointer), p);
  EXPECT_EQ(host_pointer, nullptr);
  EXPECT_EQ(ordinal, 0);
  EXPECT_NE(id, 0u);

  CUpointer_attribute tokens = CU_POINTER_ATTRIBUTE_P2P_TOKENS;
  EXPECT_EQ(cuPointerGetAttributes(1, &tokens, data, p), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuPointerGetAttributes(0, attributes, data, p), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuMemFree_v2(p));
}

TEST(Pointers, AddressRangeOfDeviceMemory) {
  init_primary(0);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, 5000));
  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_CU(cuMemGetAddressRange_v2(&base, &size, p + 4999));
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 5000u);
  EXPECT_EQ(cuMemGetAddressRange_v2(&base, &size, p + 5000 + (4ull << 30)), CUDA_ERROR_NOT_FOUND);
  ASSERT_CU(cuMemFree_v2(p));
}

}  // namespace
}  // namespace fakecuda::test
