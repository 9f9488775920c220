// libnvidia-ml.so.1, loaded once per process for every part of gpulimit that
// asks NVML something: libgpulimit.so's NVML hooks and its context
// measurement, gpulimitd's driver cross-check and policy devices, the CLI,
// the CUPTI tracer. GPULIMIT_NVML_FUNCTIONS names each function gpulimit
// calls once; the slots and the lookups are generated from it, so no list
// can drift from another.
//
// The load is lazy (the first call), thread-safe, and fit to run inside
// libgpulimit.so's hooks: no global constructors, no output, no
// exceptions, no allocation beyond dlopen's own, and no lock held around
// dlopen (a thread waiting for another's load could hold the loader's own
// lock). Threads that ask at once may each dlopen the library; the first
// to finish publishes the one answer every caller gets. The library is the one the
// process has already when the program loaded it, else it is loaded now
// (RTLD_LOCAL), and it is never unloaded: a driver library is not built for
// dlclose. Lookups go to glibc's dlsym, never to the one libgpulimit.so
// interposes, so each slot holds libnvidia-ml's own function, also for the
// names gpulimit hooks (nvmlDeviceGetMemoryInfo).
//
// Initialising NVML is the caller's: each decides whether to call
// nvmlInit_v2, and whether to shut NVML down again.
#pragma once

#include "gpulimit/nvidia/nvml_subset.h"

// One row per NVML function gpulimit calls: its name, as nvml_subset.h
// declares it (which also gives the signature).
// clang-format off
#define GPULIMIT_NVML_FUNCTIONS(X)                                                     \
  X(nvmlInit_v2)                                                                       \
  X(nvmlShutdown)                                                                      \
  X(nvmlErrorString)                                                                   \
  X(nvmlDeviceGetCount_v2)                                                             \
  X(nvmlDeviceGetHandleByIndex_v2)                                                     \
  X(nvmlDeviceGetHandleByUUID)                                                         \
  X(nvmlDeviceGetIndex)                                                                \
  X(nvmlDeviceGetUUID)                                                                 \
  X(nvmlDeviceGetMemoryInfo)                                                           \
  X(nvmlDeviceGetMemoryInfo_v2)                                                        \
  X(nvmlDeviceGetComputeRunningProcesses_v3)
// clang-format on

namespace gpulimit::nvidia {

constexpr char kNvmlLibraryName[] = "libnvidia-ml.so.1";

// libnvidia-ml's functions, one slot per row, named as NVML names them; a
// slot is null where this libnvidia-ml lacks the function (an older driver),
// and the others are usable all the same.
struct NvmlFunctions {
#define GPULIMIT_NVML_SLOT(name) decltype(&::name) name;
  GPULIMIT_NVML_FUNCTIONS(GPULIMIT_NVML_SLOT)
#undef GPULIMIT_NVML_SLOT
};

// libnvidia-ml.so.1's functions, loaded the first time any caller asks.
// nullptr when the library cannot be loaded, and then `*why_not` (when
// given) is dlerror's line, kept for every later call. nullptr too when
// called on the thread that is loading it (from code that the dlopen
// runs): that call must not wait for the load it is part of.
const NvmlFunctions* load_nvml(const char** why_not = nullptr) noexcept;

}  // namespace gpulimit::nvidia
