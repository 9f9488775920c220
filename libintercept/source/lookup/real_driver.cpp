#include "lookup/real_driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

#include "lookup/real_loader.h"

namespace gpulimit::real {

#define GPULIMIT_REAL_SLOT(base, version, symbol, suffix) \
  std::atomic<PFN_##base##_v##version##suffix> symbol{nullptr};
GPULIMIT_DRIVER_HOOKS(GPULIMIT_REAL_SLOT)
GPULIMIT_DRIVER_CALLS(GPULIMIT_REAL_SLOT)
#undef GPULIMIT_REAL_SLOT

}  // namespace gpulimit::real

namespace gpulimit {
namespace {

// Hooked rows first, in list order: exported_address(i) is row i's.
constexpr const char* kSymbolNames[] = {
#define GPULIMIT_SYMBOL_NAME(base, version, symbol, suffix) #symbol,
    GPULIMIT_DRIVER_HOOKS(GPULIMIT_SYMBOL_NAME) GPULIMIT_DRIVER_CALLS(GPULIMIT_SYMBOL_NAME)
#undef GPULIMIT_SYMBOL_NAME
};
constexpr int kRows = sizeof(kSymbolNames) / sizeof(kSymbolNames[0]);

void* exported[kRows];
std::atomic<bool> loaded{false};

// Set while this thread loads the driver: a library constructor that calls
// back into a hook must not deadlock on the load it is part of.
thread_local bool loading = false;

void load_once() {
  loading = true;
  // A copy of gpulimit in a namespace of dlmopen's (dlopen_override.cpp)
  // stands guard there: its hooks come first for every library of that
  // namespace, and it loads no driver, so they refuse.
  if (!loader::in_base_namespace()) {
    std::fprintf(stderr,
                 "gpulimit: CUDA refused in a namespace made by dlmopen: gpulimit caps the "
                 "program's own driver only\n");
    loading = false;
    return;
  }
  // The program may have linked or dlopened the driver already.
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!handle) handle = dlopen("libcuda.so.1", RTLD_NOW);
  if (handle) {
    for (int i = 0; i < kRows; ++i)
      exported[i] = real_dlsym(handle, kSymbolNames[i]);
    int i = 0;
#define GPULIMIT_FILL_SLOT(base, version, symbol, suffix)                              \
  real::symbol.store(reinterpret_cast<PFN_##base##_v##version##suffix>(exported[i++]), \
                     std::memory_order_release);
    GPULIMIT_DRIVER_HOOKS(GPULIMIT_FILL_SLOT)
    GPULIMIT_DRIVER_CALLS(GPULIMIT_FILL_SLOT)
#undef GPULIMIT_FILL_SLOT
  }
  loaded.store(handle != nullptr, std::memory_order_release);
  loading = false;
}

}  // namespace

void* real_dlsym(void* handle, const char* name) {
  // Never the override: a lookup by handle from here finds the driver's own.
  return loader::find_next() ? gpulimit_next_dlsym(handle, name) : nullptr;
}

bool load_driver() {
  if (loaded.load(std::memory_order_acquire)) return true;
  if (loading) return false;
  static std::once_flag once;
  std::call_once(once, load_once);
  return loaded.load(std::memory_order_acquire);
}

void* exported_address(int index) {
  return index >= 0 && index < kRows && load_driver() ? exported[index] : nullptr;
}

}  // namespace gpulimit
