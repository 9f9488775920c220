#include "cu_check.h"

#include <errno.h>

#include <cstdio>

namespace workloads {

namespace {

// The driver's name for `result`, or null.
const char* driver_error_name(CUresult result) {
  // The toolkit's stub libcuda fails every call with this, cuGetErrorName
  // included; it is the error seen when the stub directory shadows the real
  // driver, so it gets its name regardless.
  if (result == CUDA_ERROR_STUB_LIBRARY) return "CUDA_ERROR_STUB_LIBRARY";
  const char* name = nullptr;
  if (driver.pfn_cuGetErrorName && driver.pfn_cuGetErrorName(result, &name) == CUDA_SUCCESS)
    return name;
  return nullptr;
}

}  // namespace

std::string error_name(CUresult result) {
  if (const char* name = driver_error_name(result)) return name;
  return "CUresult " + std::to_string(static_cast<int>(result));
}

void report_failed_call(const char* call, CUresult result, const char* file, int line) {
  const char* name = driver_error_name(result);
  std::fprintf(stderr, "%s: %s failed: %s (%d) [%s:%d]\n", program_invocation_short_name, call,
               name ? name : "CUresult", static_cast<int>(result), file, line);
}

void report_error(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", program_invocation_short_name, message.c_str());
}

}  // namespace workloads
