// Checked driver calls. A failed call is reported once, where it failed, with
// the call as written; callers further up only pass the CUresult on
// (RETURN_IF_ERROR), so a user sees one line, not a trail.
#pragma once

#include <cuda.h>

#include <string>

#include "driver_api.h"

namespace workloads {

// "CUDA_ERROR_OUT_OF_MEMORY", or "CUresult 999" when the driver has no name
// for it (or is not loaded yet).
std::string error_name(CUresult result);

// One line on stderr: "<program>: <call> failed: <NAME> (<code>) [file:line]".
void report_failed_call(const char* call, CUresult result, const char* file, int line);

// One line on stderr: "<program>: <message>".
void report_error(const std::string& message);

}  // namespace workloads

// Calls a driver function through the loaded table, written as the plain
// call: CU_CHECK(cuMemAlloc(&ptr, bytes)). On failure reports it and returns
// the CUresult from the enclosing function.
#define CU_CHECK(call)                                                                   \
  do {                                                                                   \
    const CUresult cu_check_result_ = ::workloads::driver.pfn_##call;                    \
    if (cu_check_result_ != CUDA_SUCCESS) {                                              \
      ::workloads::report_failed_call(#call, cu_check_result_, __FILE_NAME__, __LINE__); \
      return cu_check_result_;                                                           \
    }                                                                                    \
  } while (0)

// Returns the CUresult of `expr` from the enclosing function unless it is
// CUDA_SUCCESS; whoever failed has reported it already.
#define RETURN_IF_ERROR(expr)                                                    \
  do {                                                                           \
    const CUresult return_if_error_result_ = (expr);                             \
    if (return_if_error_result_ != CUDA_SUCCESS) return return_if_error_result_; \
  } while (0)
