// fakecuda_helper: a second (third...) process for the simulator's
// multi-process tests. Each command prints one line per result.
//   devices                 "<count>" then "<ordinal> <uuid> <pci bus id>" per device
//   init                    the name of cuInit's result
//   alloc BYTES             allocates, prints the result, then holds it until killed
//   spin NS COUNT           runs COUNT timed kernels of NS each, prints "done"
//   fork                    initialises, forks; the child prints what cuInit and
//                           cuMemAlloc return there
//   load FILE               prints what cuModuleLoad of FILE returns
//   library FILE            loads FILE as a library while contexts exist on devices
//                           0 and 1, then creates another on device 1; prints the
//                           loading mode and the device memory each step took
#include <cuda.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

const char* name(CUresult r) {
  const char* n = nullptr;
  cuGetErrorName(r, &n);
  return n ? n : "?";
}

CUcontext primary() {
  CUcontext ctx = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    std::printf("init-failed\n");
    std::exit(3);
  }
  return ctx;
}

constexpr const char* kPtx =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry spin(.param .u64 spin_param_0, .param .u64 spin_param_1)\n{\n ret;\n}\n";

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc < 2) return 2;
  const std::string cmd = argv[1];
  if (cmd == "init") {
    std::printf("%s\n", name(cuInit(0)));
    return 0;
  }
  if (cmd == "devices") {
    if (CUresult r = cuInit(0); r != CUDA_SUCCESS) {
      std::printf("%s\n", name(r));
      return 0;
    }
    int count = 0;
    cuDeviceGetCount(&count);
    std::printf("%d\n", count);
    for (int i = 0; i < count; ++i) {
      CUuuid uuid;
      char bus[32];
      cuDeviceGetUuid_v2(&uuid, i);
      cuDeviceGetPCIBusId(bus, sizeof(bus), i);
      std::printf("%d ", i);
      for (unsigned char b : uuid.bytes)
        std::printf("%02x", b);
      std::printf(" %s\n", bus);
    }
    return 0;
  }
  if (cmd == "alloc" && argc == 3) {
    primary();
    CUdeviceptr p = 0;
    std::printf("%s\n", name(cuMemAlloc_v2(&p, std::strtoull(argv[2], nullptr, 10))));
    for (;;)
      pause();
  }
  if (cmd == "spin" && argc == 4) {
    primary();
    CUmodule module = nullptr;
    CUfunction f = nullptr;
    CUstream stream = nullptr;
    if (cuModuleLoadData(&module, kPtx) || cuModuleGetFunction(&f, module, "spin") ||
        cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING))
      return 3;
    unsigned long long ns = std::strtoull(argv[2], nullptr, 10);
    unsigned long long* counter = nullptr;
    void* params[] = {&ns, &counter};
    const long count = std::strtol(argv[3], nullptr, 10);
    std::printf("started\n");
    for (long i = 0; i < count; ++i)
      if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr)) return 4;
    if (cuStreamSynchronize(stream)) return 5;
    std::printf("done\n");
    return 0;
  }
  if (cmd == "load" && argc == 3) {
    primary();
    CUmodule module = nullptr;
    std::printf("%s\n", name(cuModuleLoad(&module, argv[2])));
    return 0;
  }
  if (cmd == "library" && argc == 3) {
    CUcontext ctx0 = primary();
    auto free_on = [](CUcontext ctx) {
      size_t free = 0, total = 0;
      cuCtxSetCurrent(ctx);
      cuMemGetInfo_v2(&free, &total);
      return static_cast<long long>(free);
    };
    CUcontext ctx1 = nullptr, ctx2 = nullptr;
    if (cuCtxCreate(&ctx1, nullptr, 0, 1)) return 3;
    CUmoduleLoadingMode mode;
    cuModuleGetLoadingMode(&mode);
    std::printf("mode %s\n", mode == CU_MODULE_EAGER_LOADING ? "eager" : "lazy");
    const long long before0 = free_on(ctx0), before1 = free_on(ctx1);
    cuCtxSetCurrent(ctx0);
    CUlibrary library = nullptr;
    if (cuLibraryLoadFromFile(&library, argv[2], nullptr, nullptr, 0, nullptr, nullptr, 0))
      return 4;
    std::printf("load %lld %lld\n", before0 - free_on(ctx0), before1 - free_on(ctx1));
    const long long ready1 = free_on(ctx1);
    if (cuCtxCreate(&ctx2, nullptr, 0, 1)) return 5;
    std::printf("new-context %lld\n", ready1 - free_on(ctx2));
    CUkernel kernel = nullptr;
    CUfunction f = nullptr;
    const long long loaded0 = free_on(ctx0);
    if (cuLibraryEnumerateKernels(&kernel, 1, library) || cuKernelGetFunction(&f, kernel)) return 6;
    std::printf("function %lld\n", loaded0 - free_on(ctx0));
    return cuLibraryUnload(library) == CUDA_SUCCESS ? 0 : 7;
  }
  if (cmd == "fork") {
    primary();
    pid_t child = fork();
    if (child == 0) {
      CUdeviceptr p = 0;
      std::printf("child-init %s\n", name(cuInit(0)));
      std::printf("child-alloc %s\n", name(cuMemAlloc_v2(&p, 1 << 20)));
      std::fflush(stdout);
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CUdeviceptr p = 0;
    std::printf("parent-alloc %s\n", name(cuMemAlloc_v2(&p, 1 << 20)));
    return 0;
  }
  return 2;
}
