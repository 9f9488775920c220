// Preloaded ahead of libgpulimit.so: counts the getenv calls made from
// inside libgpulimit.so, so a test can show the hooks never read the
// environment once attached (CUDA-NOTES: getenv on every call slowed
// launch-heavy jobs under other interposers).
#include <dlfcn.h>

#include <atomic>
#include <cstring>

namespace {

std::atomic<long> calls_from_library{0};

bool called_from_library(void* return_address) {
  Dl_info info{};
  if (!dladdr(return_address, &info) || !info.dli_fname) return false;
  return std::strstr(info.dli_fname, "libgpulimit.so") != nullptr;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) char* getenv(const char* name) {
  using Getenv = char* (*)(const char*);
  static Getenv next = reinterpret_cast<Getenv>(dlsym(RTLD_NEXT, "getenv"));
  if (called_from_library(__builtin_return_address(0)))
    calls_from_library.fetch_add(1, std::memory_order_relaxed);
  return next ? next(name) : nullptr;
}

__attribute__((visibility("default"))) long getenv_calls_from_gpulimit() {
  return calls_from_library.load(std::memory_order_relaxed);
}

}  // extern "C"
