#include "gpulimit/nvidia/nvml_library.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstring>

namespace gpulimit::nvidia {
namespace {

using DlsymFn = void* (*)(void*, const char*);

// All of it static and constant-initialised: nothing runs before main.
constinit NvmlFunctions functions{};
constinit bool available = false;     // written once, inside the load
constinit char load_error[256] = {};  // dlerror's line, when not available
constinit pthread_once_t once = PTHREAD_ONCE_INIT;
constinit std::atomic<bool> loaded{false};
// The thread inside the load, 0 (no thread's id) when none.
constinit std::atomic<pthread_t> loading_thread{0};

// glibc's dlsym. Inside libgpulimit.so a plain call to dlsym binds to
// libgpulimit's own, which answers the names it hooks with its hooks: a slot
// filled that way would call back into the hook. Asked by version, so that
// the question itself never reaches an interposed dlsym.
DlsymFn real_dlsym() {
  void* fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!fn) fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  return fn ? reinterpret_cast<DlsymFn>(fn) : &dlsym;
}

void keep_error(const char* text) {
  std::strncpy(load_error, text ? text : "unknown error", sizeof load_error - 1);
}

void load_once() {
  loading_thread.store(pthread_self(), std::memory_order_relaxed);
  // The program may have loaded NVML already (pynvml, nvidia-smi's
  // library): then that copy is the one to ask.
  void* handle = dlopen(kNvmlLibraryName, RTLD_NOW | RTLD_NOLOAD);
  if (!handle) handle = dlopen(kNvmlLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (handle) {
    const DlsymFn lookup = real_dlsym();
#define GPULIMIT_NVML_LOOKUP(name) \
  functions.name = reinterpret_cast<decltype(&::name)>(lookup(handle, #name));
    GPULIMIT_NVML_FUNCTIONS(GPULIMIT_NVML_LOOKUP)
#undef GPULIMIT_NVML_LOOKUP
    available = true;
  } else {
    keep_error(dlerror());
  }
  loading_thread.store(0, std::memory_order_relaxed);
  loaded.store(true, std::memory_order_release);
}

}  // namespace

const NvmlFunctions* load_nvml(const char** why_not) noexcept {
  if (!loaded.load(std::memory_order_acquire)) {
    if (pthread_equal(loading_thread.load(std::memory_order_relaxed), pthread_self())) {
      if (why_not) *why_not = "libnvidia-ml.so.1 is being loaded by this very thread";
      return nullptr;
    }
    pthread_once(&once, load_once);
  }
  if (available) return &functions;
  if (why_not) *why_not = load_error;
  return nullptr;
}

}  // namespace gpulimit::nvidia
