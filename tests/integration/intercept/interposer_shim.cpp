// A second interposer beside gpulimit, of the kind that ships as
// libcuda.so.1 ahead of the driver: it loads the real driver by its path,
// looks up each function by handle (dlsym(driver, name)), and forwards
// every call to it. gpulimit loads it as "libcuda.so.1" and forwards to it;
// its lookups must find the driver's functions, not gpulimit's hooks, or
// each call would come back to gpulimit without end
// (driver_routes_test.cpp). Each forwarded function is a jump through a
// slot filled when the library loads, so it keeps any signature.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "gpulimit/intercept/hook_list.h"

// What the workload calls beyond gpulimit's lists.
#define SHIM_WORKLOAD_CALLS(X) \
  X(, , cuCtxSetCurrent, )     \
  X(, , cuDeviceGet, )

#define SHIM_ALL(X) GPULIMIT_DRIVER_HOOKS(X) GPULIMIT_DRIVER_CALLS(X) SHIM_WORKLOAD_CALLS(X)

extern "C" {
#define SHIM_SLOT(base, version, symbol, suffix) \
  __attribute__((visibility("hidden"))) void* shim_slot_##symbol = nullptr;
SHIM_ALL(SHIM_SLOT)
#undef SHIM_SLOT
}

#define SHIM_TRAMPOLINE(base, version, symbol, suffix)         \
  ".globl " #symbol "\n.type " #symbol ", @function\n" #symbol \
  ":\n"                                                        \
  "    jmpq *shim_slot_" #symbol "(%rip)\n.size " #symbol ", .-" #symbol "\n"
asm(".text\n" SHIM_ALL(SHIM_TRAMPOLINE));
#undef SHIM_TRAMPOLINE

namespace {

__attribute__((constructor)) void find_the_driver() {
  void* driver = dlopen(FAKECUDA_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    std::fprintf(stderr, "interposer_shim: %s\n", dlerror());
    std::abort();
  }
#define SHIM_FILL(base, version, symbol, suffix) shim_slot_##symbol = dlsym(driver, #symbol);
  SHIM_ALL(SHIM_FILL)
#undef SHIM_FILL
}

}  // namespace
