// Instructions a hooked cuLaunchKernel adds, counted by callgrind (exact and
// repeatable, unlike nanoseconds on a shared 2-core machine): the same loop
// through the driver directly and through libgpulimit.so's hook. Run by
// benchmarks/hook_instructions.sh. "gated": the hook of a process attached
// to a stand-in gpulimitd whose board says it holds the token (the launch
// gate's fast path).
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "holding_server.h"
using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**);
extern "C" __attribute__((noinline)) void launch_loop(Launch launch, CUfunction f, CUstream s,
                                                      int n) {
  void* target = nullptr;
  void* params[] = {&target};
  for (int i = 0; i < n; ++i)
    launch(f, 0, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}
int main(int argc, char** argv) {
  const bool gated = argc > 1 && std::strcmp(argv[1], "gated") == 0;
  const bool hooked = gated || (argc > 1 && std::strcmp(argv[1], "hooked") == 0);
  char directory[] = "/tmp/gpulimit-instructions-XXXXXX";
  if (gated) {
    if (!mkdtemp(directory)) return 1;
    new HoldingServer(std::string(directory) + "/gpulimitd.sock");  // lives until exit
    setenv("GPULIMIT_SOCKET", (std::string(directory) + "/gpulimitd.sock").c_str(), 1);
    setenv("GPULIMIT_TENANT", "instructions", 1);
  }
  void* lib = dlopen(GPULIMIT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  Launch launch = hooked ? reinterpret_cast<Launch>(dlsym(lib, "cuLaunchKernel")) : &cuLaunchKernel;
  // The library's cuInit when gated: it attaches there.
  auto init = gated ? reinterpret_cast<CUresult (*)(unsigned)>(dlsym(lib, "cuInit")) : &cuInit;
  CUcontext ctx;
  CUmodule m;
  CUfunction f;
  CUstream s;
  const char* ptx =
      ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry touch(.param .u64 p)\n{\n "
      "ret;\n}\n";
  if (init(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) ||
      cuModuleLoadData(&m, ptx) || cuModuleGetFunction(&f, m, "touch") || cuStreamCreate(&s, 0))
    return 1;
  // A zero grid: the driver refuses it at once, so the loop counts the call
  // path rather than the simulator's queueing.
  launch_loop(launch, f, s, 10000);
  if (gated) std::filesystem::remove_all(directory);
  return 0;
}
