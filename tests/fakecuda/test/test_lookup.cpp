// cuGetProcAddress answers like the real driver: the variant the version
// names, the per-thread variant when asked for, NULL for unknown names.
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

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

// cudaTypedefs.h names every variant: PFN_<base>_v<version>[_ptsz|_ptds].
struct Variants {
  std::vector<int> legacy;
  std::vector<std::pair<int, std::string>> per_thread;  // version, suffix
};

std::map<std::string, Variants> toolkit_variants() {
  std::ifstream in(CUDA_TYPEDEFS_H);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  std::map<std::string, Variants> out;
  for (size_t pos = all.find("PFN_"); pos != std::string::npos; pos = all.find("PFN_", pos + 1)) {
    const size_t end = all.find(')', pos);
    const std::string name = all.substr(pos + 4, end - pos - 4);
    std::string suffix;
    std::string rest = name;
    if (rest.size() > 5 && (rest.ends_with("_ptsz") || rest.ends_with("_ptds"))) {
      suffix = rest.substr(rest.size() - 5);
      rest.resize(rest.size() - 5);
    }
    const size_t v = rest.rfind("_v");
    if (v == std::string::npos || rest.find_first_not_of("0123456789", v + 2) != std::string::npos)
      continue;
    const std::string base = rest.substr(0, v);
    const int version = std::stoi(rest.substr(v + 2));
    Variants& variants = out[base];
    if (suffix.empty())
      variants.legacy.push_back(version);
    else
      variants.per_thread.emplace_back(version, suffix);
  }
  for (auto& [base, variants] : out) {
    std::sort(variants.legacy.begin(), variants.legacy.end());
    variants.legacy.erase(std::unique(variants.legacy.begin(), variants.legacy.end()),
                          variants.legacy.end());
  }
  return out;
}

std::string variant_name(const std::string& base, size_t index) {
  return index == 0 ? base : base + "_v" + std::to_string(index + 1);
}

// For every function the simulator knows, every variant the toolkit names
// up to the driver's version is served, as the exported symbol of that
// variant: a caller never gets another ABI than it asked for.
TEST(Lookup, EveryVariantTheToolkitNamesIsServed) {
  size_t checked = 0;
  for (const auto& [base, variants] : toolkit_variants()) {
    CUdriverProcAddressQueryResult status{};
    lookup(base.c_str(), 13000, 0, &status);
    if (status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) continue;  // not simulated
    for (size_t i = 0; i < variants.legacy.size(); ++i) {
      const int version = variants.legacy[i];
      if (version > 13000) continue;
      EXPECT_EQ(lookup(base.c_str(), version, CU_GET_PROC_ADDRESS_LEGACY_STREAM),
                exported(variant_name(base, i).c_str()))
          << base << " at " << version;
      ++checked;
    }
    for (const auto& [version, suffix] : variants.per_thread) {
      if (version > 13000) continue;
      size_t i = 0;  // the legacy variant this per-thread one belongs to
      while (i + 1 < variants.legacy.size() && variants.legacy[i + 1] <= version)
        ++i;
      const std::string name = variant_name(base, i) + suffix;
      EXPECT_EQ(lookup(base.c_str(), version, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                exported(name.c_str()))
          << base << " at " << version << " per thread";
      ++checked;
    }
  }
  EXPECT_GT(checked, 200u);
}

}  // namespace
}  // namespace fakecuda::test
