// hostile_routes ROUTE: reaches the driver one way that sidesteps symbol
// interposition, as a capped tenant (libgpulimit.so preloaded) trying to
// hold more than its cap would, for driver_routes_test.cpp. Allocation
// routes try 10 allocations of 512 MiB on device 0, keep what they got,
// print "held N" and wait for stdin to close (the test reads the device
// meanwhile); runpath routes print "answer N" (42 when the library was
// found along its loader's RUNPATH).
//
// Linked to libcuda.so.1 like most CUDA programs, so that the driver is in
// the global scope.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace {

constexpr size_t kChunk = 512ull << 20;
constexpr int kTries = 10;

using Lookup = std::function<void*(const char*)>;
using LibraryTake = int (*)(size_t, int);
using Open = void* (*)(const char*, int);

// Allocates through driver functions found by `lookup`.
int take_through(const Lookup& lookup) {
  auto init = reinterpret_cast<decltype(&cuInit)>(lookup("cuInit"));
  auto retain =
      reinterpret_cast<decltype(&cuDevicePrimaryCtxRetain)>(lookup("cuDevicePrimaryCtxRetain"));
  auto set_current = reinterpret_cast<decltype(&cuCtxSetCurrent)>(lookup("cuCtxSetCurrent"));
  auto allocate = reinterpret_cast<decltype(&cuMemAlloc_v2)>(lookup("cuMemAlloc_v2"));
  CUcontext context = nullptr;
  if (!init || !retain || !set_current || !allocate || init(0) != CUDA_SUCCESS ||
      retain(&context, 0) != CUDA_SUCCESS || set_current(context) != CUDA_SUCCESS)
    return 0;
  int held = 0;
  for (int i = 0; i < kTries; ++i) {
    CUdeviceptr pointer = 0;
    if (allocate(&pointer, kChunk) == CUDA_SUCCESS) ++held;
  }
  return held;
}

Lookup by_handle(void* handle) {
  return [handle](const char* name) { return handle ? dlsym(handle, name) : nullptr; };
}

// Calls `function` of the library `handle`.
int take_in(void* handle, const char* function = "linked_allocator_take") {
  if (!handle) {
    std::fprintf(stderr, "hostile_routes: %s\n", dlerror());
    return 0;
  }
  auto take = reinterpret_cast<LibraryTake>(dlsym(handle, function));
  return take ? take(kChunk, kTries) : 0;
}

// The C library's own dlopen, looked up the ways a program can.
Open libc_dlopen_by_handle() {
  return reinterpret_cast<Open>(dlsym(dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), "dlopen"));
}
Open libc_dlopen_by_version() {
  void* f = dlvsym(RTLD_DEFAULT, "dlopen", "GLIBC_2.34");
  return reinterpret_cast<Open>(f ? f : dlvsym(RTLD_DEFAULT, "dlopen", "GLIBC_2.2.5"));
}

int deepbind_through(Open open) {
  return open ? take_in(open(LINKED_ALLOCATOR_PATH, RTLD_NOW | RTLD_DEEPBIND)) : 0;
}

// A copy of the driver's file under another name: the loader sees a new
// object, not the driver already loaded.
void* driver_copy() {
  const std::string copy = std::string(std::getenv("GPULIMIT_TEST_DIR")) + "/renamed-driver.so";
  std::filesystem::copy_file(FAKECUDA_CUDA_PATH, copy,
                             std::filesystem::copy_options::overwrite_existing);
  return dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
}

int allocate(std::string_view route) {
  if (route == "deepbind") return take_in(dlopen(LINKED_ALLOCATOR_PATH, RTLD_NOW | RTLD_DEEPBIND));
  if (route == "deepbind-lazy")
    return take_in(dlopen(LINKED_ALLOCATOR_PATH, RTLD_LAZY | RTLD_DEEPBIND));
  if (route == "deepbind-default-lookup")
    return take_in(dlopen(LINKED_ALLOCATOR_PATH, RTLD_NOW | RTLD_DEEPBIND),
                   "linked_allocator_take_by_default_lookup");
  if (route == "deepbind-through-libc-handle") return deepbind_through(libc_dlopen_by_handle());
  if (route == "deepbind-through-dlvsym") return deepbind_through(libc_dlopen_by_version());
  if (route == "dlmopen-library")
    return take_in(dlmopen(LM_ID_NEWLM, LINKED_ALLOCATOR_PATH, RTLD_NOW));
  if (route == "dlmopen-driver")
    return take_through(by_handle(dlmopen(LM_ID_NEWLM, FAKECUDA_CUDA_PATH, RTLD_NOW)));
  if (route == "symbolic") return take_in(dlopen(SYMBOLIC_ALLOCATOR_PATH, RTLD_NOW));
  if (route == "driver-by-path")
    return take_through(by_handle(dlopen(FAKECUDA_CUDA_PATH, RTLD_NOW)));
  if (route == "driver-copy") return take_through(by_handle(driver_copy()));
  if (route == "dependent-handle")
    return take_through(by_handle(dlopen(LINKED_ALLOCATOR_PATH, RTLD_NOW)));
  if (route == "next-from-library")
    return take_in(dlopen(LINKED_ALLOCATOR_PATH, RTLD_NOW), "linked_allocator_take_by_next_lookup");
  if (route == "deepbind-through-next-from-library") {
    void* library = dlopen(LINKED_ALLOCATOR_PATH, RTLD_NOW);
    auto take = library ? reinterpret_cast<int (*)(const char*, size_t, int)>(
                              dlsym(library, "linked_allocator_take_in_deepbind_by_next_dlopen"))
                        : nullptr;
    return take ? take(SYMBOLIC_ALLOCATOR_PATH, kChunk, kTries) : 0;
  }
  std::fprintf(stderr, "hostile_routes: no route %.*s\n", static_cast<int>(route.size()),
               route.data());
  std::exit(2);
}

// dlmopen into new namespaces that fail: each says why, and none leaves a
// namespace behind (glibc has 16), so a real load still succeeds after.
int failing_dlmopens() {
  for (int i = 0; i < 40; ++i) {
    if (dlmopen(LM_ID_NEWLM, "/nonexistent/libnothing.so", RTLD_NOW)) return 0;
    const char* error = dlerror();
    if (!error ||
        std::string_view(error).find("/nonexistent/libnothing.so") == std::string_view::npos) {
      std::printf("dlerror %s\n", error ? error : "(none)");
      return 0;
    }
  }
  if (dlmopen(LM_ID_NEWLM, nullptr, RTLD_NOW) || !dlerror()) return 0;
  void* loaded = dlmopen(LM_ID_NEWLM, RUNPATH_DEPENDENCY_PATH, RTLD_NOW);
  auto answer =
      loaded ? reinterpret_cast<int (*)()>(dlsym(loaded, "runpath_dependency_answer")) : nullptr;
  return answer ? answer() : 0;
}

int runpath(std::string_view route) {
  if (route == "runpath-failing-dlmopens") return failing_dlmopens();
  void* loader = dlopen(RUNPATH_LOADER_PATH, RTLD_NOW);
  auto open =
      loader ? reinterpret_cast<int (*)(int)>(dlsym(loader, "runpath_loader_open")) : nullptr;
  if (!open) return 0;
  if (route == "runpath-dlopen") return open(0);
  if (route == "runpath-deepbind") return open(1);
  if (route == "runpath-dlmopen") return open(2);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: hostile_routes ROUTE\n");
    return 2;
  }
  const std::string_view route = argv[1];
  if (route.starts_with("runpath")) {
    std::printf("answer %d\n", runpath(route));
    return 0;
  }
  std::printf("held %d\n", allocate(route));
  std::fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  return 0;
}
