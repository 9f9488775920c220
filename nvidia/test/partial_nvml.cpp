// A libnvidia-ml.so.1 of an old or broken driver: three of the functions
// gpulimit calls, none of the others. Loading it calls the program's
// gpulimit_nvml_test_loading(), when the program has one: what code the
// dlopen runs (a constructor, a hook it reaches) sees of the load in progress.
#include <dlfcn.h>

#include "gpulimit/nvidia/nvml_subset.h"

#define PARTIAL_NVML_EXPORT extern "C" __attribute__((visibility("default")))

PARTIAL_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  return NVML_SUCCESS;
}

PARTIAL_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
  return NVML_SUCCESS;
}

PARTIAL_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = 0;
  return NVML_SUCCESS;
}

namespace {

__attribute__((constructor)) void call_the_loading_program() {
  auto loading = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gpulimit_nvml_test_loading"));
  if (loading) loading();
}

}  // namespace
