// The real driver behind the hooks: one slot per hooked variant, filled from
// libcuda.so.1 the first time any hook needs it (never before: a process of
// the tenant that never uses CUDA never loads the driver).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>

#include "gpulimit/intercept/hook_list.h"

// Hooks are the driver's own names, exported with C linkage.
#define GPULIMIT_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpulimit::real {

#define GPULIMIT_REAL_SLOT(base, version, symbol, suffix) \
  extern std::atomic<PFN_##base##_v##version##suffix> symbol;
GPULIMIT_DRIVER_HOOKS(GPULIMIT_REAL_SLOT)
GPULIMIT_DRIVER_CALLS(GPULIMIT_REAL_SLOT)
#undef GPULIMIT_REAL_SLOT

}  // namespace gpulimit::real

namespace gpulimit {

// Loads libcuda.so.1 and fills every slot; once per process, thread-safe.
// False when no driver can be loaded (or when called from inside the load).
bool load_driver();

// The real dlsym (never the override in dlsym_override.cpp).
void* real_dlsym(void* handle, const char* name);

// The address libcuda exports for the row `index` of GPULIMIT_DRIVER_HOOKS
// (nullptr when this driver lacks that variant). Fixed once loaded.
void* exported_address(int index);

// The slot of a row, and its value: the function a hook forwards to.
template <typename Fn>
inline Fn real_function(std::atomic<Fn>& slot) {
  Fn fn = slot.load(std::memory_order_relaxed);
  if (__builtin_expect(fn != nullptr, 1)) return fn;
  load_driver();
  return slot.load(std::memory_order_acquire);
}

}  // namespace gpulimit

// Calls the real variant `symbol`, or answers CUDA_ERROR_NOT_FOUND when the
// driver lacks it (a program linked against a newer driver than it runs on).
#define GPULIMIT_CALL_REAL(symbol, ...)                                         \
  do {                                                                          \
    auto _gpulimit_real = ::gpulimit::real_function(::gpulimit::real::symbol);  \
    return _gpulimit_real ? _gpulimit_real(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND; \
  } while (0)
