// Initialisation, devices and errors, as the real driver answers them.
#include <cstring>

#include "support.h"

namespace fakecuda::test {
namespace {

TEST(Driver, CallsBeforeInitAreRefused) {
  // Arrange: this test's process has not called cuInit.
  int count = -1;
  CUdeviceptr p = 0;
  // Act / Assert
  EXPECT_EQ(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuMemAlloc_v2(&p, 1024), CUDA_ERROR_NOT_INITIALIZED);
  int version = 0;
  EXPECT_CU(cuDriverGetVersion(&version));  // answers before cuInit
  EXPECT_EQ(version, 13000);
}

TEST(Driver, InitRejectsFlagsAndNullOutputs) {
  EXPECT_EQ(cuInit(1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_CU(cuInit(0));
  EXPECT_EQ(cuDeviceGetCount(nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDriverGetVersion(nullptr), CUDA_ERROR_INVALID_VALUE);
  size_t free = 0;
  EXPECT_EQ(cuMemGetInfo_v2(&free, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST(Driver, DevicesFollowTheEnvironment) {
  ASSERT_CU(cuInit(0));
  int count = 0;
  ASSERT_CU(cuDeviceGetCount(&count));
  EXPECT_EQ(count, 2);
  size_t total = 0;
  ASSERT_CU(cuDeviceTotalMem_v2(&total, 1));
  EXPECT_EQ(total, 4ull << 30);
  int sms = 0, major = 0;
  ASSERT_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  ASSERT_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  EXPECT_EQ(sms, 132);
  EXPECT_EQ(major, 9);
  char name[64];
  ASSERT_CU(cuDeviceGetName(name, sizeof(name), 0));
  EXPECT_STREQ(name, "FakeCUDA Simulated GPU");
  EXPECT_EQ(cuDeviceTotalMem_v2(&total, 2), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST(Driver, DevicesHaveDistinctStableUuidsAndBusIds) {
  ASSERT_CU(cuInit(0));
  CUuuid a, b;
  ASSERT_CU(cuDeviceGetUuid_v2(&a, 0));
  ASSERT_CU(cuDeviceGetUuid_v2(&b, 1));
  EXPECT_NE(std::memcmp(a.bytes, b.bytes, sizeof(a.bytes)), 0);
  char bus[32];
  ASSERT_CU(cuDeviceGetPCIBusId(bus, sizeof(bus), 1));
  CUdevice found = -1;
  ASSERT_CU(cuDeviceGetByPCIBusId(&found, bus));
  EXPECT_EQ(found, 1);
}

TEST(Driver, VisibleDevicesSelectAndReorder) {
  const std::string all = run_helper({"devices"});
  const std::string swapped = run_helper({"devices"}, {{"CUDA_VISIBLE_DEVICES", "1,0"}});
  const std::string second = run_helper({"devices"}, {{"CUDA_VISIBLE_DEVICES", "1"}});
  // "<count>\n0 <uuid0> <bus0>\n1 <uuid1> <bus1>\n"
  auto line = [](const std::string& text, int n) {
    size_t start = 0;
    for (int i = 0; i < n; ++i)
      start = text.find('\n', start) + 1;
    return text.substr(start, text.find('\n', start) - start);
  };
  ASSERT_EQ(line(all, 0), "2");
  ASSERT_EQ(line(swapped, 0), "2");
  ASSERT_EQ(line(second, 0), "1");
  auto identity = [](const std::string& l) { return l.substr(l.find(' ') + 1); };
  EXPECT_EQ(identity(line(swapped, 1)), identity(line(all, 2)));
  EXPECT_EQ(identity(line(swapped, 2)), identity(line(all, 1)));
  EXPECT_EQ(identity(line(second, 1)), identity(line(all, 2)));
}

TEST(Driver, VisibleDevicesByUuidAndInvalidEntries) {
  // fa4ec0da-...-01 is device 1; an invalid entry ends the list.
  const std::string by_uuid = run_helper({"devices"}, {{"CUDA_VISIBLE_DEVICES", "GPU-fa4ec0da"}});
  EXPECT_EQ(by_uuid, "CUDA_ERROR_NO_DEVICE\n") << "an ambiguous UUID prefix selects nothing";
  const std::string full = run_helper(
      {"devices"}, {{"CUDA_VISIBLE_DEVICES", "GPU-fa4ec0da-0000-4000-8000-000000000001,9,0"}});
  EXPECT_EQ(full.substr(0, 2), "1\n");
  const std::string none = run_helper({"devices"}, {{"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(none, "CUDA_ERROR_NO_DEVICE\n");
  const std::string repeated = run_helper({"devices"}, {{"CUDA_VISIBLE_DEVICES", "0,0,1"}});
  EXPECT_EQ(repeated.substr(0, 2), "1\n");
}

TEST(Driver, MalformedConfigurationFailsInitWithOneLine) {
  int status = 0;
  const std::string out = run_helper({"init"}, {{"FAKECUDA_MEM", "lots"}}, &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "CUDA_ERROR_UNKNOWN\n");
}

TEST(Driver, ForkedChildOfInitialisedProcessCannotUseTheDriver) {
  const std::string out = run_helper({"fork"});
  EXPECT_NE(out.find("child-init CUDA_ERROR_NOT_INITIALIZED"), std::string::npos) << out;
  EXPECT_NE(out.find("child-alloc CUDA_ERROR_NOT_INITIALIZED"), std::string::npos) << out;
  EXPECT_NE(out.find("parent-alloc CUDA_SUCCESS"), std::string::npos) << out;
}

TEST(Driver, ErrorNamesAndStrings) {
  const char* text = nullptr;
  ASSERT_CU(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &text));
  EXPECT_STREQ(text, "CUDA_ERROR_OUT_OF_MEMORY");
  ASSERT_CU(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &text));
  EXPECT_STREQ(text, "out of memory");
  EXPECT_EQ(cuGetErrorName(static_cast<CUresult>(123456), &text), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(text, nullptr);
}

TEST(Contexts, CurrentContextStack) {
  ASSERT_CU(cuInit(0));
  CUcontext none = reinterpret_cast<CUcontext>(1);
  ASSERT_CU(cuCtxGetCurrent(&none));
  EXPECT_EQ(none, nullptr);
  CUdevice dev = -1;
  EXPECT_EQ(cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);

  CUcontext a = nullptr, b = nullptr, popped = nullptr;
  ASSERT_CU(cuCtxCreate_v2(&a, 0, 0));
  ASSERT_CU(cuCtxCreate_v2(&b, 0, 1));
  ASSERT_CU(cuCtxGetDevice(&dev));
  EXPECT_EQ(dev, 1);
  ASSERT_CU(cuCtxPopCurrent_v2(&popped));
  EXPECT_EQ(popped, b);
  ASSERT_CU(cuCtxGetDevice(&dev));
  EXPECT_EQ(dev, 0);
  ASSERT_CU(cuCtxDestroy_v2(a));
  ASSERT_CU(cuCtxDestroy_v2(b));
  EXPECT_EQ(cuCtxDestroy_v2(a), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(Contexts, CreatingAContextTakesDeviceMemory) {
  init_primary(0);
  const size_t before = free_memory();
  CUcontext extra = nullptr;
  ASSERT_CU(cuCtxCreate_v2(&extra, 0, 0));
  EXPECT_EQ(before - free_memory(), 64ull << 20);
  ASSERT_CU(cuCtxDestroy_v2(extra));
  CUcontext primary = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&primary, 0));
  ASSERT_CU(cuCtxSetCurrent(primary));
  EXPECT_EQ(free_memory(), before);
}

TEST(Contexts, ReleasingThePrimaryContextFreesItsMemory) {
  ASSERT_CU(cuInit(0));
  CUcontext ctx = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx, 1));
  ASSERT_CU(cuCtxSetCurrent(ctx));
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc_v2(&p, 512ull << 20));
  unsigned flags = 0;
  int active = 0;
  ASSERT_CU(cuDevicePrimaryCtxGetState(1, &flags, &active));
  EXPECT_EQ(active, 1);
  ASSERT_CU(cuDevicePrimaryCtxRelease_v2(1));
  ASSERT_CU(cuDevicePrimaryCtxGetState(1, &flags, &active));
  EXPECT_EQ(active, 0);
  // The context and its allocation are gone; a new one sees a clean device.
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx, 1));
  ASSERT_CU(cuCtxSetCurrent(ctx));
  EXPECT_EQ(free_memory(), (4ull << 30) - (64ull << 20));
  EXPECT_EQ(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
}

TEST(Contexts, MallocHeapLimitIsCharged) {
  init_primary(0);
  const size_t before = free_memory();
  ASSERT_CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8ull << 20));
  EXPECT_EQ(free_memory(), before);
  ASSERT_CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 72ull << 20));
  EXPECT_EQ(before - free_memory(), 64ull << 20);
  size_t value = 0;
  ASSERT_CU(cuCtxGetLimit(&value, CU_LIMIT_MALLOC_HEAP_SIZE));
  EXPECT_EQ(value, 72ull << 20);
  ASSERT_CU(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 1ull << 20));
  EXPECT_EQ(free_memory(), before);
}

}  // namespace
}  // namespace fakecuda::test
