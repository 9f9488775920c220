// cuGetProcAddress answers like the real driver: the variant the version
// names, the per-thread variant when asked for, NULL for unknown names.
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstring>

#include "support.h"

namespace fakecuda::test {
namespace {

void* exported(const char* name) {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(handle, nullptr);
  return dlsym(handle, name);
}

void* lookup(const char* name, int version, cuuint64_t flags,
             CUdriverProcAddressQueryResult* status = nullptr) {
  void* fn = reinterpret_cast<void*>(1);
  EXPECT_CU(cuGetProcAddress_v2(name, &fn, version, flags, status));
  return fn;
}

TEST(Lookup, VersionSelectsTheAbiVariant) {
  EXPECT_EQ(lookup("cuMemAlloc", 3020, 0), exported("cuMemAlloc_v2"));
  EXPECT_EQ(lookup("cuMemAlloc", 13000, 0), exported("cuMemAlloc_v2"));
  EXPECT_EQ(lookup("cuMemAlloc", 2000, 0), exported("cuMemAlloc"));
  EXPECT_EQ(lookup("cuCtxCreate", 11040, 0), exported("cuCtxCreate_v3"));
  EXPECT_EQ(lookup("cuCtxCreate", 12050, 0), exported("cuCtxCreate_v4"));
  EXPECT_EQ(lookup("cuEventElapsedTime", 12000, 0), exported("cuEventElapsedTime"));
  EXPECT_EQ(lookup("cuEventElapsedTime", 12080, 0), exported("cuEventElapsedTime_v2"));
  EXPECT_EQ(lookup("cuGraphAddKernelNode", 12000, 0), exported("cuGraphAddKernelNode_v2"));
}

TEST(Lookup, StreamFlagsSelectPerThreadVariants) {
  constexpr cuuint64_t kLegacy = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
  constexpr cuuint64_t kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  EXPECT_EQ(lookup("cuLaunchKernel", 12000, kLegacy), exported("cuLaunchKernel"));
  EXPECT_EQ(lookup("cuLaunchKernel", 12000, 0), exported("cuLaunchKernel"));
  EXPECT_EQ(lookup("cuLaunchKernel", 12000, kPerThread), exported("cuLaunchKernel_ptsz"));
  // Per-thread variants exist from 7000; before that the legacy one answers.
  EXPECT_EQ(lookup("cuLaunchKernel", 4000, kPerThread), exported("cuLaunchKernel"));
  EXPECT_EQ(lookup("cuLaunchKernelEx", 12000, kPerThread), exported("cuLaunchKernelEx_ptsz"));
  EXPECT_EQ(lookup("cuGraphLaunch", 12000, kPerThread), exported("cuGraphLaunch_ptsz"));
  EXPECT_EQ(lookup("cuLaunchCooperativeKernel", 12000, kPerThread),
            exported("cuLaunchCooperativeKernel_ptsz"));
  EXPECT_EQ(lookup("cuMemcpyHtoD", 12000, kPerThread), exported("cuMemcpyHtoD_v2_ptds"));
  EXPECT_EQ(lookup("cuMemAllocAsync", 12000, kPerThread), exported("cuMemAllocAsync_ptsz"));
  EXPECT_EQ(lookup("cuStreamGetCaptureInfo", 12030, kPerThread),
            exported("cuStreamGetCaptureInfo_v3_ptsz"));
  // No per-thread variant: the legacy one, whatever the flag.
  EXPECT_EQ(lookup("cuMemAlloc", 12000, kPerThread), exported("cuMemAlloc_v2"));
}

TEST(Lookup, UnknownNamesAndInsufficientVersions) {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  EXPECT_EQ(lookup("cuNoSuchFunction", 12000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(lookup("cuMemAlloc_v2", 12000, 0, &status), nullptr) << "names are base names";
  EXPECT_EQ(lookup("cuLaunchKernelEx", 11000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_NE(lookup("cuMemAlloc", 12000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
  void* fn = nullptr;
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &fn, 99000, 0, nullptr), CUDA_ERROR_INVALID_VALUE)
      << "a version above the driver's";
  EXPECT_EQ(cuGetProcAddress_v2(nullptr, &fn, 12000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuGetProcAddress_v2("cuInit", nullptr, 12000, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST(Lookup, GetProcAddressFindsItselfInBothForms) {
  EXPECT_EQ(lookup("cuGetProcAddress", 11030, 0), exported("cuGetProcAddress"));
  EXPECT_EQ(lookup("cuGetProcAddress", 12000, 0), exported("cuGetProcAddress_v2"));
  // The 4-argument export works on its own.
  void* fn = nullptr;
  ASSERT_CU(cuGetProcAddress("cuInit", &fn, 12000, 0));
  EXPECT_EQ(fn, exported("cuInit"));
}

TEST(Lookup, WorksBeforeInit) {
  void* fn = nullptr;
  ASSERT_CU(cuGetProcAddress_v2("cuInit", &fn, 12000, 0, nullptr));
  ASSERT_NE(fn, nullptr);
  EXPECT_CU(reinterpret_cast<PFN_cuInit_v2000>(fn)(0));
}

TEST(Lookup, ExportTableIsPresent) {
  const void* table = reinterpret_cast<const void*>(1);
  CUuuid unknown{};
  EXPECT_EQ(cuGetExportTable(&table, &unknown), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(table, nullptr);
  CUuuid test_id;
  std::memcpy(test_id.bytes, "fakecuda-test-01", 16);
  ASSERT_CU(cuGetExportTable(&table, &test_id));
  EXPECT_NE(table, nullptr);
}

}  // namespace
}  // namespace fakecuda::test
