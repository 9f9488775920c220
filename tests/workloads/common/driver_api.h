// The driver functions the workloads call, as typed function pointers, and
// the four ways of obtaining them. A workload picks the way at run time, so
// that one binary exercises every path an interposer must cover.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <optional>
#include <string>
#include <string_view>

#include "driver_entry_points.h"

namespace workloads {

enum class AccessPath {
  linked,   // addresses of the symbols this program is linked against
  dlsym,    // dlopen("libcuda.so.1") + dlsym of each exported name
  proc,     // dlsym of "cuGetProcAddress" (11.3, four arguments), the rest through it
  proc_v2,  // dlsym of "cuGetProcAddress_v2" (12.0, reports why a lookup failed)
};

enum class StreamMode {
  legacy,      // the legacy default stream: plain exports, CU_GET_PROC_ADDRESS_LEGACY_STREAM
  per_thread,  // _ptsz/_ptds exports, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
};

std::string_view to_string(AccessPath path);
std::string_view to_string(StreamMode mode);
std::optional<AccessPath> parse_access_path(std::string_view text);
std::optional<StreamMode> parse_stream_mode(std::string_view text);

// One pointer per row of WORKLOAD_DRIVER_ENTRY_POINTS, typed with the PFN of
// the variant the row names. Per-thread variants have the same type as their
// legacy variant (checked in driver_api.cpp).
struct DriverApi {
#define WORKLOAD_DECLARE_PFN(name, version, symbol) PFN_##name##_v##version pfn_##name = nullptr;
#define WORKLOAD_DECLARE_PFN_PT(name, version, symbol, pt_version, pt_suffix) \
  PFN_##name##_v##version pfn_##name = nullptr;
#define WORKLOAD_NO_PFN(name, version, symbol)
  WORKLOAD_DRIVER_ENTRY_POINTS(WORKLOAD_DECLARE_PFN, WORKLOAD_DECLARE_PFN_PT, WORKLOAD_NO_PFN)
#undef WORKLOAD_DECLARE_PFN
#undef WORKLOAD_DECLARE_PFN_PT
#undef WORKLOAD_NO_PFN
};

// The process's one table. Filled by load_driver_api, read-only afterwards.
extern DriverApi driver;

// The loaded function `name`, e.g. CU(cuMemAlloc)(&ptr, bytes).
#define CU(name) (::workloads::driver.pfn_##name)

// Fills `driver` through `path`, choosing variants for `mode`. On failure
// leaves a one-line reason in `error` (naming the missing function) and
// returns false; no function is called through a null pointer.
bool load_driver_api(AccessPath path, StreamMode mode, std::string& error);

}  // namespace workloads
