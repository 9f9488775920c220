// interposed_workload: a CUDA program whose libcuda.so.1 is interposer_shim
// (linked by its build RPATH), run as a capped tenant with libgpulimit.so
// preloaded: tries 10 allocations of 512 MiB on device 0, keeps what it got,
// prints "held N" and waits for stdin to close (driver_routes_test.cpp).
#include <cuda.h>
#include <unistd.h>

#include <cstdio>

int main() {
  CUcontext context = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&context, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(context) != CUDA_SUCCESS) {
    std::fprintf(stderr, "interposed_workload: no context\n");
    return 1;
  }
  int held = 0;
  for (int i = 0; i < 10; ++i) {
    CUdeviceptr pointer = 0;
    if (cuMemAlloc_v2(&pointer, 512ull << 20) == CUDA_SUCCESS) ++held;
  }
  std::printf("held %d\n", held);
  std::fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  return 0;
}
