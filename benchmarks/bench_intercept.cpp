// What gpulimit's hooks add to a driver call: each benchmark runs the same
// call twice in one process, once on the driver directly and once through
// libgpulimit.so's hook (loaded with dlopen, so both sit side by side), on the
// simulated driver. The added cost is the difference of the two rows. The
// process runs under a memory cap and no compute limit.
//
// The gated rows use a second copy of the library, loaded beside the first
// (a copy of the file: dlopen would hand back the first for the same path),
// attached to a stand-in gpulimitd in this process whose board says that the
// tenant holds the token: the launch gate's fast path.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "holding_server.h"

namespace {

constexpr const char* kPtx =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry touch(.param .u64 touch_param_0)\n{\n ret;\n}\n";

struct Session {
  Session() {
    char dir[] = "/tmp/gpulimit-bench-XXXXXX";
    state_dir = mkdtemp(dir);
    setenv("FAKECUDA_STATE", (state_dir + "/state").c_str(), 1);
    setenv("FAKECUDA_KERNEL_NS", "0", 1);  // measure the API, not the device
    setenv("FAKECUDA_KERNEL_NS_PER_WAVE", "0", 1);
    gpulimit = dlopen(GPULIMIT_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!gpulimit) {
      std::fprintf(stderr, "cannot load %s: %s\n", GPULIMIT_LIBRARY, dlerror());
      std::abort();
    }
    // A memory cap applies (8 GiB of the simulated 16), so the hooked
    // allocations below go through the ledger; there is no compute limit.
    setenv("GPULIMIT_MEM", "8G", 1);
    setenv("GPULIMIT_TENANT", "bench", 1);
    setenv("GPULIMIT_LEDGER_DIR", state_dir.c_str(), 1);
    auto hooked_init = hook<PFN_cuInit_v2000>("cuInit");
    if (!hooked_init || hooked_init(0) || cuDevicePrimaryCtxRetain(&ctx, 0) ||
        cuCtxSetCurrent(ctx) || cuModuleLoadData(&module, kPtx) ||
        cuModuleGetFunction(&function, module, "touch") ||
        cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING))
      std::abort();
  }
  ~Session() { std::system(("rm -rf " + state_dir).c_str()); }
  template <typename Fn>
  Fn hook(const char* name) {
    return reinterpret_cast<Fn>(dlsym(gpulimit, name));
  }
  std::string state_dir;
  void* gpulimit = nullptr;
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUstream stream = nullptr;
};

Session& session() {
  static Session s;
  return s;
}

// The second copy of the library, attached and holding the token.
struct GatedSession {
  GatedSession() {
    Session& first = session();  // reads the environment without a server first
    const std::string copy = first.state_dir + "/libgpulimit-gated.so";
    std::filesystem::copy_file(GPULIMIT_LIBRARY, copy);
    server = std::make_unique<HoldingServer>(first.state_dir + "/gpulimitd.sock");
    setenv("GPULIMIT_SOCKET", (first.state_dir + "/gpulimitd.sock").c_str(), 1);
    setenv("GPULIMIT_TENANT", "bench-gated", 1);
    gpulimit = dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
    auto init = gpulimit ? reinterpret_cast<PFN_cuInit_v2000>(dlsym(gpulimit, "cuInit")) : nullptr;
    // cuInit returns once attached: the Welcome has been sent by then.
    if (!init || init(0) || !server->welcomed) {
      std::fprintf(stderr, "cannot attach the gated copy: %s\n", gpulimit ? "cuInit" : dlerror());
      std::abort();
    }
  }
  std::unique_ptr<HoldingServer> server;
  void* gpulimit = nullptr;
};

GatedSession& gated_session() {
  // Never destroyed: the copy's threads use the board until the process ends.
  static GatedSession* s = new GatedSession();
  return *s;
}

enum class Path { kDriver, kHooked, kGatedHolding };

template <Path kPath>
PFN_cuLaunchKernel_v4000 launch_function() {
  if (kPath == Path::kHooked) return session().hook<PFN_cuLaunchKernel_v4000>("cuLaunchKernel");
  if (kPath == Path::kGatedHolding)
    return reinterpret_cast<PFN_cuLaunchKernel_v4000>(
        dlsym(gated_session().gpulimit, "cuLaunchKernel"));
  return &cuLaunchKernel;
}

template <Path kPath>
void BM_LaunchKernel(benchmark::State& state) {
  Session& s = session();
  cuCtxSetCurrent(s.ctx);
  const PFN_cuLaunchKernel_v4000 launch = launch_function<kPath>();
  unsigned long long* target = nullptr;
  void* params[] = {&target};
  size_t launched = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(launch(s.function, 1, 1, 1, 32, 1, 1, 0, s.stream, params, nullptr));
    if (++launched % 4096 == 0) {
      state.PauseTiming();
      cuStreamSynchronize(s.stream);  // keep the queue short
      state.ResumeTiming();
    }
  }
  cuStreamSynchronize(s.stream);
}
BENCHMARK(BM_LaunchKernel<Path::kDriver>)->Name("LaunchKernel/driver");
BENCHMARK(BM_LaunchKernel<Path::kHooked>)->Name("LaunchKernel/hooked");
BENCHMARK(BM_LaunchKernel<Path::kGatedHolding>)->Name("LaunchKernel/hooked_gated_holding");

// The same call with an empty grid, which the simulator refuses at once:
// nothing is queued and its executor never wakes, so the rows differ by the
// hook alone, with far less noise than launches that queue work.
template <Path kPath>
void BM_LaunchKernelRefused(benchmark::State& state) {
  Session& s = session();
  cuCtxSetCurrent(s.ctx);
  const PFN_cuLaunchKernel_v4000 launch = launch_function<kPath>();
  unsigned long long* target = nullptr;
  void* params[] = {&target};
  for (auto _ : state)
    benchmark::DoNotOptimize(launch(s.function, 0, 1, 1, 32, 1, 1, 0, s.stream, params, nullptr));
}
BENCHMARK(BM_LaunchKernelRefused<Path::kDriver>)->Name("LaunchKernelRefused/driver");
BENCHMARK(BM_LaunchKernelRefused<Path::kHooked>)->Name("LaunchKernelRefused/hooked");
BENCHMARK(BM_LaunchKernelRefused<Path::kGatedHolding>)
    ->Name("LaunchKernelRefused/hooked_gated_holding");

template <bool kHooked>
void BM_MemAllocFreePair(benchmark::State& state) {
  Session& s = session();
  cuCtxSetCurrent(s.ctx);
  auto alloc = kHooked ? s.hook<PFN_cuMemAlloc_v3020>("cuMemAlloc_v2") : &cuMemAlloc_v2;
  auto free = kHooked ? s.hook<PFN_cuMemFree_v3020>("cuMemFree_v2") : &cuMemFree_v2;
  for (auto _ : state) {
    CUdeviceptr p = 0;
    benchmark::DoNotOptimize(alloc(&p, 1 << 20));
    benchmark::DoNotOptimize(free(p));
  }
}
BENCHMARK(BM_MemAllocFreePair<false>)
    ->Name("MemAllocFree/driver")
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();
BENCHMARK(BM_MemAllocFreePair<true>)
    ->Name("MemAllocFree/hooked")
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime();

template <bool kHooked>
void BM_GetProcAddress(benchmark::State& state) {
  Session& s = session();
  auto lookup =
      kHooked ? s.hook<PFN_cuGetProcAddress_v12000>("cuGetProcAddress_v2") : &cuGetProcAddress_v2;
  for (auto _ : state) {
    void* fn = nullptr;
    benchmark::DoNotOptimize(lookup("cuLaunchKernel", &fn, 12000,
                                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr));
  }
}
BENCHMARK(BM_GetProcAddress<false>)->Name("GetProcAddress/driver");
BENCHMARK(BM_GetProcAddress<true>)->Name("GetProcAddress/hooked");

template <bool kHooked>
void BM_MemGetInfo(benchmark::State& state) {
  Session& s = session();
  cuCtxSetCurrent(s.ctx);
  auto get_info = kHooked ? s.hook<PFN_cuMemGetInfo_v3020>("cuMemGetInfo_v2") : &cuMemGetInfo_v2;
  for (auto _ : state) {
    size_t free = 0, total = 0;
    benchmark::DoNotOptimize(get_info(&free, &total));
  }
}
BENCHMARK(BM_MemGetInfo<false>)->Name("MemGetInfo/driver");
BENCHMARK(BM_MemGetInfo<true>)->Name("MemGetInfo/hooked");

// dlsym on the driver's handle: through gpulimit's dlsym (a hooked name, and
// a name it passes on) and glibc's own.
template <int kWhich>
void BM_Dlsym(benchmark::State& state) {
  Session& s = session();
  using DlsymFn = void* (*)(void*, const char*);
  DlsymFn fn = kWhich == 0 ? &dlsym : s.hook<DlsymFn>("dlsym");
  const char* name = kWhich == 2 ? "cuCtxGetDevice" : "cuMemAlloc_v2";
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  for (auto _ : state)
    benchmark::DoNotOptimize(fn(driver, name));
}
BENCHMARK(BM_Dlsym<0>)->Name("Dlsym/glibc");
BENCHMARK(BM_Dlsym<1>)->Name("Dlsym/gpulimit_hooked_name");
BENCHMARK(BM_Dlsym<2>)->Name("Dlsym/gpulimit_other_name");

}  // namespace

BENCHMARK_MAIN();
