// A second interposer, preloaded after libgpulimit.so, that looks up the
// next definition of a name the way interposers do.
#include <dlfcn.h>

extern "C" __attribute__((visibility("default"), noinline)) void* probe_rtld_next(
    const char* name) {
  // Not a tail call: dlsym must see this library as its caller.
  void* volatile found = dlsym(RTLD_NEXT, name);
  return found;
}

// It defines the names it probes, so that a wrong RTLD_NEXT would find these.
extern "C" __attribute__((visibility("default"))) int cuCtxGetDevice(int*) {
  return -1;
}
extern "C" __attribute__((visibility("default"))) int cuMemAlloc_v2(void*, unsigned long) {
  return -1;
}
