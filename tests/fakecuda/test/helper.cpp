// fakecuda_helper: a second (third...) process for the simulator's
// multi-process tests. Each command prints one line per result.
//   devices                 "<count>" then "<ordinal> <uuid> <pci bus id>" per device
//   init                    the name of cuInit's result
//   alloc BYTES             allocates, prints the result, then holds it until killed
//   spin NS COUNT           runs COUNT timed kernels of NS each, prints "done"
//   fork                    initialises, forks; the child prints what cuInit and
//                           cuMemAlloc return there
//   ipc-export BYTES        allocates BYTES filled with 0x5a, prints "<result> <handle
//                           hex>", then answers commands on stdin (below)
//   ipc-open HANDLE         opens the memory handle, prints the result, then answers
//                           commands on stdin
//     read                  the first 4 bytes, hex ("5a5a5a5a")
//     fill V                sets every byte to hex V, prints the result
//     open                  (ipc-open) opens the handle again: "same" or the error
//     close                 (ipc-open) closes it once, prints the result
//     free                  (ipc-export) frees the memory, prints the result
//     exit                  exits at once, freeing nothing
//   ipc-churn HANDLE        opens and closes the handle in a loop, printing "running"
//                           once, until killed
//   ipc-export-churn        allocates, exports and frees in a loop, printing "running"
//                           once, until killed
//   vmm-import PID FD BYTES imports the VMM allocation (BYTES) exported as
//                           descriptor FD of process PID (through /proc/PID/fd/FD),
//                           maps it, prints the result, then answers on stdin
//                           read and exit (as above), and
//     release               unmaps and releases it, prints the result
//   ipc-event HANDLE        opens the event handle, prints the result, then answers
//     query                 cuEventQuery's result
//     sync                  cuEventSynchronize's result
//     record                records it on a new stream, prints the result
//   load FILE               prints what cuModuleLoad of FILE returns
//   library FILE            loads FILE as a library while contexts exist on devices
//                           0 and 1, then creates another on device 1; prints the
//                           loading mode and the device memory each step took
#include <cuda.h>
#include <fcntl.h>
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

std::string to_hex(const void* bytes, size_t n) {
  std::string out;
  char two[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(two, sizeof two, "%02x", static_cast<const unsigned char*>(bytes)[i]);
    out += two;
  }
  return out;
}

bool from_hex(const std::string& hex, void* bytes, size_t n) {
  if (hex.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i)
    static_cast<unsigned char*>(bytes)[i] =
        static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

// One command from stdin; "" at EOF.
std::string next_command() {
  std::string line;
  int c;
  while ((c = std::getchar()) != EOF && c != '\n')
    line += static_cast<char>(c);
  return line;
}

// Answers the commands on `p` (bytes of memory) until EOF or "exit".
void serve_memory(CUdeviceptr p, size_t bytes, const CUipcMemHandle* handle) {
  for (std::string cmd = next_command(); !cmd.empty(); cmd = next_command()) {
    if (cmd == "read") {
      unsigned char first[4] = {};
      CUresult r = cuMemcpyDtoH_v2(first, p, sizeof first);
      std::printf("%s\n", r ? name(r) : to_hex(first, sizeof first).c_str());
    } else if (cmd.rfind("fill ", 0) == 0) {
      const auto v = static_cast<unsigned char>(std::stoul(cmd.substr(5), nullptr, 16));
      std::printf("%s\n", name(cuMemsetD8_v2(p, v, bytes)));
    } else if (cmd == "open" && handle) {
      CUdeviceptr again = 0;
      CUresult r = cuIpcOpenMemHandle_v2(&again, *handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      std::printf("%s\n", r ? name(r) : again == p ? "same" : "different");
    } else if (cmd == "close" && handle) {
      std::printf("%s\n", name(cuIpcCloseMemHandle(p)));
    } else if (cmd == "free" && !handle) {
      std::printf("%s\n", name(cuMemFree_v2(p)));
    } else if (cmd == "exit") {
      std::exit(0);
    } else {
      std::printf("unknown\n");
    }
  }
}

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
  if (cmd == "ipc-export" && argc == 3) {
    primary();
    const size_t bytes = std::strtoull(argv[2], nullptr, 10);
    CUdeviceptr p = 0;
    CUipcMemHandle handle{};
    CUresult r = cuMemAlloc_v2(&p, bytes);
    if (r == CUDA_SUCCESS) r = cuMemsetD8_v2(p, 0x5a, bytes);
    if (r == CUDA_SUCCESS) r = cuIpcGetMemHandle(&handle, p);
    std::printf("%s %s\n", name(r), to_hex(&handle, sizeof handle).c_str());
    serve_memory(p, bytes, nullptr);
    return 0;
  }
  if (cmd == "ipc-open" && argc == 3) {
    primary();
    CUipcMemHandle handle{};
    if (!from_hex(argv[2], &handle, sizeof handle)) return 2;
    CUdeviceptr p = 0;
    CUresult r = cuIpcOpenMemHandle_v2(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    std::printf("%s\n", name(r));
    size_t bytes = 0;
    if (r == CUDA_SUCCESS) cuMemGetAddressRange_v2(nullptr, &bytes, p);
    serve_memory(p, bytes, &handle);
    return 0;
  }
  if (cmd == "vmm-import" && argc == 5) {
    primary();
    const std::string path = std::string("/proc/") + argv[2] + "/fd/" + argv[3];
    const size_t bytes = std::strtoull(argv[4], nullptr, 10);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return 2;
    CUmemGenericAllocationHandle handle = 0;
    CUresult r = cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(intptr_t{fd}),
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    CUdeviceptr va = 0;
    if (r == CUDA_SUCCESS) r = cuMemAddressReserve(&va, bytes, 0, 0, 0);
    if (r == CUDA_SUCCESS) r = cuMemMap(va, bytes, 0, handle, 0);
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (r == CUDA_SUCCESS) r = cuMemSetAccess(va, bytes, &access, 1);
    std::printf("%s\n", name(r));
    std::fflush(stdout);
    if (r != CUDA_SUCCESS) return 0;
    for (std::string line = next_command(); !line.empty(); line = next_command()) {
      if (line == "release") {
        r = cuMemUnmap(va, bytes);
        if (r == CUDA_SUCCESS) r = cuMemRelease(handle);
        std::printf("%s\n", name(r));
      } else if (line == "read") {
        unsigned char first[4] = {};
        r = cuMemcpyDtoH_v2(first, va, sizeof first);
        std::printf("%s\n", r ? name(r) : to_hex(first, sizeof first).c_str());
      } else if (line == "exit") {
        return 0;
      } else {
        std::printf("unknown\n");
      }
      std::fflush(stdout);
    }
    return 0;
  }
  if (cmd == "ipc-churn" && argc == 3) {
    primary();
    CUipcMemHandle handle{};
    if (!from_hex(argv[2], &handle, sizeof handle)) return 2;
    std::printf("running\n");
    for (;;) {
      CUdeviceptr p = 0;
      if (cuIpcOpenMemHandle_v2(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) return 4;
      if (cuIpcCloseMemHandle(p)) return 5;
    }
  }
  if (cmd == "ipc-export-churn") {
    primary();
    std::printf("running\n");
    for (;;) {
      CUdeviceptr p = 0;
      CUipcMemHandle handle{};
      if (cuMemAlloc_v2(&p, 4 << 20) || cuIpcGetMemHandle(&handle, p) || cuMemFree_v2(p)) return 4;
    }
  }
  if (cmd == "ipc-event" && argc == 3) {
    primary();
    CUipcEventHandle handle{};
    if (!from_hex(argv[2], &handle, sizeof handle)) return 2;
    CUevent event = nullptr;
    CUresult r = cuIpcOpenEventHandle(&event, handle);
    std::printf("%s\n", name(r));
    for (std::string c = next_command(); !c.empty(); c = next_command()) {
      if (c == "query") {
        std::printf("%s\n", name(cuEventQuery(event)));
      } else if (c == "sync") {
        std::printf("%s\n", name(cuEventSynchronize(event)));
      } else if (c == "record") {
        CUstream s = nullptr;
        r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
        if (r == CUDA_SUCCESS) r = cuEventRecord(event, s);
        if (r == CUDA_SUCCESS) r = cuStreamSynchronize(s);
        std::printf("%s\n", name(r));
      } else {
        std::printf("unknown\n");
      }
    }
    return 0;
  }
  return 2;
}
