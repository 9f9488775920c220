// A library that links libcuda.so.1 and allocates device memory through it,
// for driver_routes_test.cpp: loaded the hostile ways (RTLD_DEEPBIND, into
// a namespace of its own, built -Bsymbolic) it must still meet the cap.
// Each function makes the primary context of device 0 current and
// allocates `bytes` up to `times` times, keeping what it got; it returns
// how many allocations succeeded.
#include <cuda.h>
#include <dlfcn.h>

namespace {

using Allocate = CUresult (*)(CUdeviceptr*, size_t);

int take_with(Allocate allocate, size_t bytes, int times) {
  CUcontext context = nullptr;
  if (!allocate || cuInit(0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&context, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS)
    return 0;
  int held = 0;
  for (int i = 0; i < times; ++i) {
    CUdeviceptr pointer = 0;
    if (allocate(&pointer, bytes) == CUDA_SUCCESS) ++held;
  }
  return held;
}

}  // namespace

// The driver's names, bound as this library's lookup scope binds them.
extern "C" __attribute__((visibility("default"))) int linked_allocator_take(size_t bytes,
                                                                            int times) {
  return take_with(&cuMemAlloc_v2, bytes, times);
}

// cuMemAlloc_v2 looked up in this library's default scope.
extern "C" __attribute__((visibility("default"))) int linked_allocator_take_by_default_lookup(
    size_t bytes, int times) {
  return take_with(reinterpret_cast<Allocate>(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")), bytes, times);
}

// cuMemAlloc_v2 looked up as the next definition after this library.
extern "C" __attribute__((visibility("default"), noinline)) int
linked_allocator_take_by_next_lookup(size_t bytes, int times) {
  void* volatile found = dlsym(RTLD_NEXT, "cuMemAlloc_v2");  // not a tail call
  return take_with(reinterpret_cast<Allocate>(found), bytes, times);
}

// Loads the library `path` with RTLD_DEEPBIND through the dlopen that comes
// next after this library (the C library's, past gpulimit's), and
// allocates in it.
extern "C" __attribute__((visibility("default"), noinline)) int
linked_allocator_take_in_deepbind_by_next_dlopen(const char* path, size_t bytes, int times) {
  void* volatile found = dlsym(RTLD_NEXT, "dlopen");  // not a tail call
  auto open = reinterpret_cast<void* (*)(const char*, int)>(found);
  void* library = open ? open(path, RTLD_NOW | RTLD_DEEPBIND) : nullptr;
  auto take = library
                  ? reinterpret_cast<int (*)(size_t, int)>(dlsym(library, "linked_allocator_take"))
                  : nullptr;
  return take ? take(bytes, times) : 0;
}
