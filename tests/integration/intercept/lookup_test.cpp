// Run with libgpulimit.so preloaded on the simulated driver. Every way a
// program reaches the driver leads to gpulimit's hook of exactly the variant
// asked for, and everything gpulimit does not hook leads to the driver.
// dladdr names the library and the symbol behind an address.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "gpulimit/intercept/hook_list.h"
#include "preloaded_main.h"

extern "C" void* probe_rtld_next(const char* name);  // next_probe.cpp, preloaded after us

namespace {

struct Origin {
  std::string library;
  std::string symbol;
};

Origin origin(const void* address) {
  Dl_info info{};
  if (!address || !dladdr(address, &info)) return {};
  std::string library = info.dli_fname ? info.dli_fname : "";
  library = library.substr(library.rfind('/') + 1);
  return {library, info.dli_sname ? info.dli_sname : ""};
}

bool is_hook(const void* address, const std::string& symbol) {
  Origin o = origin(address);
  return o.library == "libgpulimit.so" && o.symbol == symbol;
}

bool is_driver(const void* address) {
  return origin(address).library == "libcuda.so.1";
}

void* proc_address(const char* base, int version, cuuint64_t flags,
                   CUdriverProcAddressQueryResult* status = nullptr) {
  void* fn = reinterpret_cast<void*>(1);
  EXPECT_EQ(cuGetProcAddress_v2(base, &fn, version, flags, status), CUDA_SUCCESS) << base;
  return fn;
}

TEST(Intercept, LinkedSymbolsAreHooks) {
#define EXPECT_LINKED_HOOK(base, version, symbol, suffix) \
  EXPECT_TRUE(is_hook(reinterpret_cast<void*>(&symbol), #symbol)) << #symbol;
  GPULIMIT_DRIVER_HOOKS(EXPECT_LINKED_HOOK)
#undef EXPECT_LINKED_HOOK
  EXPECT_TRUE(is_driver(reinterpret_cast<void*>(&cuCtxSynchronize))) << "not hooked: the driver's";
}

TEST(Intercept, DlsymOnTheDriverAnswersHooksForExactNamesOnly) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  ASSERT_NE(driver, nullptr);
#define EXPECT_DLSYM_HOOK(base, version, symbol, suffix) \
  EXPECT_TRUE(is_hook(dlsym(driver, #symbol), #symbol)) << #symbol;
  GPULIMIT_DRIVER_HOOKS(EXPECT_DLSYM_HOOK)
#undef EXPECT_DLSYM_HOOK
  EXPECT_TRUE(is_driver(dlsym(driver, "cuCtxGetDevice")));
  EXPECT_EQ(dlsym(driver, "cuMemAlloc_v2x"), nullptr);
  EXPECT_EQ(dlsym(driver, "cuMemAlloc_v"), nullptr);
  EXPECT_EQ(dlsym(driver, "cudnnCreate"), nullptr);
  EXPECT_TRUE(is_hook(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), "cuMemAlloc_v2"));
  EXPECT_TRUE(is_driver(dlsym(RTLD_DEFAULT, "cuCtxSynchronize")));
}

TEST(Intercept, RtldNextStaysRelativeToTheCaller) {
  // A library preloaded after gpulimit looks up the next cuCtxGetDevice: the
  // driver's, not its own (which a dlsym that is not a tail jump would give).
  EXPECT_TRUE(is_driver(probe_rtld_next("cuCtxGetDevice")))
      << origin(probe_rtld_next("cuCtxGetDevice")).library;
  // The next cuMemAlloc_v2 after it would be the driver's, uncapped: it gets
  // the hook, which sits below every library loaded after gpulimit.
  EXPECT_TRUE(is_hook(probe_rtld_next("cuMemAlloc_v2"), "cuMemAlloc_v2"))
      << origin(probe_rtld_next("cuMemAlloc_v2")).library;
}

TEST(Intercept, GetProcAddressAnswersTheHookOfEveryVariant) {
#define EXPECT_PROC_HOOK(base, version, symbol, suffix)                                        \
  EXPECT_TRUE(                                                                                 \
      is_hook(proc_address(#base, version,                                                     \
                           sizeof(#suffix) > 1 ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM \
                                               : CU_GET_PROC_ADDRESS_LEGACY_STREAM),           \
              #symbol))                                                                        \
      << #base " at " #version " " #suffix;
  GPULIMIT_DRIVER_HOOKS(EXPECT_PROC_HOOK)
#undef EXPECT_PROC_HOOK
}

TEST(Intercept, GetProcAddressFollowsVersionAndStreamFlags) {
  constexpr cuuint64_t kPerThread = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  EXPECT_TRUE(is_hook(proc_address("cuMemAlloc", 13000, 0), "cuMemAlloc_v2"));
  EXPECT_TRUE(is_hook(proc_address("cuMemAlloc", 3010, 0), "cuMemAlloc"));
  EXPECT_TRUE(is_hook(proc_address("cuLaunchKernel", 13000, 0), "cuLaunchKernel"));
  EXPECT_TRUE(is_hook(proc_address("cuLaunchKernel", 13000, kPerThread), "cuLaunchKernel_ptsz"));
  EXPECT_TRUE(is_hook(proc_address("cuLaunchKernel", 6050, kPerThread), "cuLaunchKernel"))
      << "no per-thread variant before 7.0";
  EXPECT_TRUE(is_hook(proc_address("cuMemAlloc", 13000, kPerThread), "cuMemAlloc_v2"));
  // Asked for itself, cuGetProcAddress answers with the form of the version.
  EXPECT_TRUE(is_hook(proc_address("cuGetProcAddress", 11030, 0), "cuGetProcAddress"));
  EXPECT_TRUE(is_hook(proc_address("cuGetProcAddress", 12000, 0), "cuGetProcAddress_v2"));
  // The 4-argument form answers the same way.
  void* fn = nullptr;
  ASSERT_EQ(cuGetProcAddress("cuLaunchKernelEx", &fn, 12000, kPerThread), CUDA_SUCCESS);
  EXPECT_TRUE(is_hook(fn, "cuLaunchKernelEx_ptsz"));
}

TEST(Intercept, GetProcAddressPassesEverythingElseThrough) {
  EXPECT_TRUE(is_driver(proc_address("cuCtxGetDevice", 13000, 0)));
  EXPECT_TRUE(is_driver(
      proc_address("cuStreamSynchronize", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)));
  CUdriverProcAddressQueryResult status{};
  EXPECT_EQ(proc_address("cuNoSuchFunction", 12000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_EQ(proc_address("cuLaunchKernelEx", 11000, 0, &status), nullptr);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  void* fn = nullptr;
  EXPECT_EQ(cuGetProcAddress_v2("cuMemAlloc", &fn, 99000, 0, nullptr), CUDA_ERROR_INVALID_VALUE)
      << "the driver's own answer to a version above its own";
}

TEST(Intercept, ExportTablesArePassedThroughUntouched) {
  // Not hooked at all: the call reaches the simulator, which knows this table.
  CUuuid id;
  std::memcpy(id.bytes, "fakecuda-test-01", 16);
  const void* table = nullptr;
  ASSERT_EQ(cuGetExportTable(&table, &id), CUDA_SUCCESS);
  EXPECT_TRUE(is_driver(table));
}

}  // namespace

int main(int argc, char** argv) {
  return intercept_test::run_preloaded(argc, argv,
                                       {{"LD_PRELOAD", GPULIMIT_LIBRARY_PATH ":" NEXT_PROBE_PATH}});
}
