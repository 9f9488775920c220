// A library whose RUNPATH ($ORIGIN/runpath) is the only way to find
// librunpath_dependency.so: glibc searches it for a dlopen or dlmopen this
// library makes, found from the caller's return address. gpulimit's
// dlopen and dlmopen must keep that caller (driver_routes_test.cpp).
#include <dlfcn.h>

#include <cstdio>

namespace {

int answer_of(void* handle) {
  if (!handle) {
    std::printf("dlerror %s\n", dlerror());
    return 0;
  }
  auto answer = reinterpret_cast<int (*)()>(dlsym(handle, "runpath_dependency_answer"));
  return answer ? answer() : 0;
}

}  // namespace

// Opens the dependency by its bare name: 0 with dlopen, 1 with dlopen and
// RTLD_DEEPBIND, 2 with dlmopen into a new namespace. Returns what it
// answers (42), or 0.
extern "C" __attribute__((visibility("default"), noinline)) int runpath_loader_open(int how) {
  void* volatile handle = nullptr;
  if (how == 0) handle = dlopen("librunpath_dependency.so", RTLD_NOW);
  if (how == 1) handle = dlopen("librunpath_dependency.so", RTLD_NOW | RTLD_DEEPBIND);
  if (how == 2) handle = dlmopen(LM_ID_NEWLM, "librunpath_dependency.so", RTLD_NOW);
  return answer_of(handle);
}
