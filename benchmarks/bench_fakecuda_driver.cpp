// What the simulated driver itself costs per call, on this machine. These
// are the "driver called directly" columns that gpulimit's hook overheads
// are measured against; they say nothing about a real GPU.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace {

constexpr const char* kPtx =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry touch(.param .u64 touch_param_0)\n{\n ret;\n}\n";

struct Session {
  Session() {
    char dir[] = "/tmp/fakecuda-bench-XXXXXX";
    state_dir = mkdtemp(dir);
    setenv("FAKECUDA_STATE", (state_dir + "/state").c_str(), 1);
    setenv("FAKECUDA_KERNEL_NS", "0", 1);  // measure the API, not the device
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) ||
        cuModuleLoadData(&module, kPtx) || cuModuleGetFunction(&function, module, "touch") ||
        cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING))
      std::abort();
  }
  ~Session() { std::system(("rm -rf " + state_dir).c_str()); }
  std::string state_dir;
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUstream stream = nullptr;
};

Session& session() {
  static Session s;
  return s;
}

void BM_LaunchKernel(benchmark::State& state) {
  Session& s = session();
  cuCtxSetCurrent(s.ctx);
  unsigned long long* target = nullptr;
  void* params[] = {&target};
  size_t launched = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        cuLaunchKernel(s.function, 1, 1, 1, 32, 1, 1, 0, s.stream, params, nullptr));
    if (++launched % 4096 == 0) {
      state.PauseTiming();
      cuStreamSynchronize(s.stream);  // keep the queue short
      state.ResumeTiming();
    }
  }
  cuStreamSynchronize(s.stream);
}
BENCHMARK(BM_LaunchKernel);

void BM_MemAllocFreePair(benchmark::State& state) {
  Session& s = session();
  cuCtxSetCurrent(s.ctx);
  for (auto _ : state) {
    CUdeviceptr p = 0;
    benchmark::DoNotOptimize(cuMemAlloc_v2(&p, 1 << 20));
    benchmark::DoNotOptimize(cuMemFree_v2(p));
  }
}
BENCHMARK(BM_MemAllocFreePair)->Threads(1)->Threads(8)->UseRealTime();

void BM_GetProcAddress(benchmark::State& state) {
  session();
  for (auto _ : state) {
    void* fn = nullptr;
    benchmark::DoNotOptimize(cuGetProcAddress_v2(
        "cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr));
  }
}
BENCHMARK(BM_GetProcAddress);

void BM_Dlsym(benchmark::State& state) {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW);
  for (auto _ : state)
    benchmark::DoNotOptimize(dlsym(handle, "cuMemAlloc_v2"));
}
BENCHMARK(BM_Dlsym);

void BM_MemGetInfo(benchmark::State& state) {
  Session& s = session();
  cuCtxSetCurrent(s.ctx);
  for (auto _ : state) {
    size_t free = 0, total = 0;
    benchmark::DoNotOptimize(cuMemGetInfo_v2(&free, &total));
  }
}
BENCHMARK(BM_MemGetInfo);

}  // namespace

BENCHMARK_MAIN();
