#include "gpulimit/nvidia/nvml_library.h"

#include <dlfcn.h>
#include <sched.h>

#include <atomic>
#include <cstring>

namespace gpulimit::nvidia {
namespace {

using DlsymFn = void* (*)(void*, const char*);

// All of it static and constant-initialised: nothing runs before main.
// The published answer, written once by the first load to finish.
constinit NvmlFunctions functions{};
constinit bool available = false;     // whether `functions` holds a library's
constinit char load_error[256] = {};  // dlerror's line, when not available
enum State : int { kUnloaded, kPublishing, kLoaded };
constinit std::atomic<int> state{kUnloaded};
// Whether this thread is inside its own load (a constructor that the
// dlopen runs, asking again). Initial-exec: the loader runs inside hooks,
// where the dynamic TLS allocator must not be entered.
constinit thread_local bool loading_here __attribute__((tls_model("initial-exec"))) = false;

// glibc's dlsym. Inside libgpulimit.so a plain call to dlsym binds to
// libgpulimit's own, which answers the names it hooks with its hooks: a slot
// filled that way would call back into the hook. Asked by version, so that
// the question itself never reaches an interposed dlsym.
DlsymFn real_dlsym() {
  void* fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!fn) fn = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  return fn ? reinterpret_cast<DlsymFn>(fn) : &dlsym;
}

// One load's result, before it is published.
struct Load {
  NvmlFunctions functions{};
  bool available = false;
  const char* error = nullptr;
};

Load load() {
  Load result;
  // The program may have loaded NVML already (pynvml, nvidia-smi's
  // library): then that copy is the one to ask.
  void* handle = dlopen(kNvmlLibraryName, RTLD_NOW | RTLD_NOLOAD);
  if (!handle) handle = dlopen(kNvmlLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    result.error = dlerror();
    return result;
  }
  const DlsymFn lookup = real_dlsym();
#define GPULIMIT_NVML_LOOKUP(name) \
  result.functions.name = reinterpret_cast<decltype(&::name)>(lookup(handle, #name));
  GPULIMIT_NVML_FUNCTIONS(GPULIMIT_NVML_LOOKUP)
#undef GPULIMIT_NVML_LOOKUP
  result.available = true;
  return result;
}

// The first load to finish becomes the answer; the others' handles are
// references to the same library, which is never unloaded.
void publish(const Load& result) {
  int expected = kUnloaded;
  if (state.compare_exchange_strong(expected, kPublishing, std::memory_order_acquire)) {
    functions = result.functions;
    available = result.available;
    if (!result.available)
      std::strncpy(load_error, result.error ? result.error : "unknown error",
                   sizeof load_error - 1);
    state.store(kLoaded, std::memory_order_release);
    return;
  }
  // Another thread is copying its answer in: a few stores, no lock, no call.
  while (state.load(std::memory_order_acquire) != kLoaded)
    sched_yield();
}

}  // namespace

// No lock is held around dlopen: a thread that asks from inside another
// library's dlopen (a constructor, holding the loader's lock) while a
// second thread loads NVML (waiting for that lock) loads on its own instead
// of waiting for the second, which would wait for it in turn.
const NvmlFunctions* load_nvml(const char** why_not) noexcept {
  if (state.load(std::memory_order_acquire) != kLoaded) {
    if (loading_here) {
      if (why_not) *why_not = "libnvidia-ml.so.1 is being loaded by this very thread";
      return nullptr;
    }
    loading_here = true;
    const Load result = load();
    loading_here = false;
    publish(result);
  }
  if (available) return &functions;
  if (why_not) *why_not = load_error;
  return nullptr;
}

}  // namespace gpulimit::nvidia
