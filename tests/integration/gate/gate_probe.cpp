// A CUDA driver program that the launch gate's tests run with libgpulimit.so
// preloaded on the simulated driver, one command at a time: each line read
// from stdin is a command, each answer one line on stdout, printed when the
// command has returned. Times are CLOCK_MONOTONIC nanoseconds, the clock of
// the simulator's kernel trace.
//
//   init [DEVICE]             cuInit; DEVICE's primary context made current;
//                             the spin kernel loaded; a non-blocking stream
//   device DEVICE             make DEVICE's primary context current (a
//                             stream of its own there)
//   launch PATH NS COUNT      COUNT launches of an NS-long kernel through
//                             PATH: kernel, kernel_ex, cooperative or graph,
//                             each optionally suffixed _ptsz; "launched CODE T"
//   context                   a context of its own on the current device
//                             (cuCtxCreate), made current, the spin kernel
//                             loaded in it; "context CODE"
//   sync                      cuCtxSynchronize; "synced CODE T"
//   begin-capture             cuStreamBeginCapture (global mode) on the stream
//   end-capture NS            a launch into the capture, then
//                             cuStreamEndCapture; "captured LAUNCH END T"
//   storm THREADS MS NS       THREADS threads launch NS-long kernels on their
//                             per-thread default streams (_ptsz) for MS ms,
//                             a few queued at a time; "stormed LAUNCHES CODE"
//   threads                   "threads N": this process's threads
//   fork NS                   a child launches one kernel and exits with the
//                             launch's result; "child PID STATUS"
//   exit
#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr const char* kPtx =
    ".version 8.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry spin(.param .u64 spin_param_0, .param .u64 spin_param_1)\n{\n ret;\n}\n";

uint64_t now_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

template <typename Fn>
Fn hook(const char* name) {
  // The preloaded library comes first in the global scope: its hooks.
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

struct Device {
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  CUstream stream = nullptr;
  std::map<uint64_t, CUgraphExec> graphs;  // by kernel duration
};

std::map<int, Device> devices;
Device* current = nullptr;
CUdeviceptr counter = 0;

CUresult open_device(int ordinal) {
  Device& d = devices[ordinal];
  if (!d.context) {
    CUdevice device = 0;
    if (CUresult r = cuDeviceGet(&device, ordinal); r != CUDA_SUCCESS) return r;
    if (CUresult r = cuDevicePrimaryCtxRetain(&d.context, device); r != CUDA_SUCCESS) return r;
    if (CUresult r = cuCtxSetCurrent(d.context); r != CUDA_SUCCESS) return r;
    if (CUresult r = cuModuleLoadData(&d.module, kPtx); r != CUDA_SUCCESS) return r;
    if (CUresult r = cuModuleGetFunction(&d.function, d.module, "spin"); r != CUDA_SUCCESS)
      return r;
    if (CUresult r = cuStreamCreate(&d.stream, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS) return r;
  }
  current = &d;
  return cuCtxSetCurrent(d.context);
}

// Contexts of cuCtxCreate, beside the primary contexts of `devices`.
std::vector<std::unique_ptr<Device>> created;

CUresult create_context() {
  CUdevice device = 0;
  if (CUresult r = cuCtxGetDevice(&device); r != CUDA_SUCCESS) return r;
  auto d = std::make_unique<Device>();
  if (CUresult r = cuCtxCreate(&d->context, nullptr, 0, device); r != CUDA_SUCCESS) return r;
  if (CUresult r = cuModuleLoadData(&d->module, kPtx); r != CUDA_SUCCESS) return r;
  if (CUresult r = cuModuleGetFunction(&d->function, d->module, "spin"); r != CUDA_SUCCESS)
    return r;
  if (CUresult r = cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS) return r;
  current = d.get();
  created.push_back(std::move(d));
  return CUDA_SUCCESS;
}

CUresult launch_once(const std::string& path, uint64_t ns) {
  void* params[] = {&ns, &counter};
  Device& d = *current;
  const bool ptsz = path.size() > 5 && path.compare(path.size() - 5, 5, "_ptsz") == 0;
  const std::string base = ptsz ? path.substr(0, path.size() - 5) : path;
  if (base == "kernel") {
    auto fn = hook<decltype(&cuLaunchKernel)>(ptsz ? "cuLaunchKernel_ptsz" : "cuLaunchKernel");
    return fn(d.function, 1, 1, 1, 32, 1, 1, 0, d.stream, params, nullptr);
  }
  if (base == "kernel_ex") {
    auto fn =
        hook<decltype(&cuLaunchKernelEx)>(ptsz ? "cuLaunchKernelEx_ptsz" : "cuLaunchKernelEx");
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 32;
    config.blockDimY = config.blockDimZ = 1;
    config.hStream = d.stream;
    return fn(&config, d.function, params, nullptr);
  }
  if (base == "cooperative") {
    auto fn = hook<decltype(&cuLaunchCooperativeKernel)>(ptsz ? "cuLaunchCooperativeKernel_ptsz"
                                                              : "cuLaunchCooperativeKernel");
    return fn(d.function, 1, 1, 1, 32, 1, 1, 0, d.stream, params);
  }
  if (base == "graph") {
    CUgraphExec& exec = d.graphs[ns];
    if (!exec) {
      // Captured: a capturing stream passes the gate whoever holds the token.
      CUgraph graph = nullptr;
      if (CUresult r = cuStreamBeginCapture(d.stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
          r != CUDA_SUCCESS)
        return r;
      cuLaunchKernel(d.function, 1, 1, 1, 32, 1, 1, 0, d.stream, params, nullptr);
      if (CUresult r = cuStreamEndCapture(d.stream, &graph); r != CUDA_SUCCESS) return r;
      if (CUresult r = cuGraphInstantiateWithFlags(&exec, graph, 0); r != CUDA_SUCCESS) return r;
    }
    auto fn = hook<decltype(&cuGraphLaunch)>(ptsz ? "cuGraphLaunch_ptsz" : "cuGraphLaunch");
    return fn(exec, d.stream);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// Launches from `threads` threads at once for `milliseconds`.
std::string storm(int threads, uint64_t milliseconds, uint64_t ns) {
  auto launch = hook<decltype(&cuLaunchKernel)>("cuLaunchKernel_ptsz");
  std::atomic<uint64_t> launches{0};
  std::atomic<int> error{CUDA_SUCCESS};
  const uint64_t end = now_ns() + milliseconds * 1'000'000;
  std::vector<std::thread> launchers;
  for (int t = 0; t < threads; ++t)
    launchers.emplace_back([&] {
      cuCtxSetCurrent(current->context);
      uint64_t duration = ns;
      void* params[] = {&duration, &counter};
      for (uint64_t i = 1; now_ns() < end; ++i) {
        const CUresult r =
            launch(current->function, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
        if (r != CUDA_SUCCESS) error.store(r);
        launches.fetch_add(1);
        if (i % 4 == 0) cuStreamSynchronize(CU_STREAM_PER_THREAD);
      }
      cuStreamSynchronize(CU_STREAM_PER_THREAD);
    });
  for (std::thread& t : launchers)
    t.join();
  return "stormed " + std::to_string(launches.load()) + " " + std::to_string(error.load());
}

int thread_count() {
  int count = 0;
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(tasks))
      if (entry->d_name[0] != '.') ++count;
    closedir(tasks);
  }
  return count;
}

void answer(const std::string& line) {
  std::cout << line << std::endl;
}

}  // namespace

int main() {
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream words(line);
    std::string command;
    words >> command;
    if (command == "init") {
      int ordinal = 0;
      words >> ordinal;
      CUresult r = cuInit(0);
      if (r == CUDA_SUCCESS) r = open_device(ordinal);
      if (r == CUDA_SUCCESS) r = cuMemAlloc(&counter, sizeof(uint64_t));
      answer("init " + std::to_string(r));
    } else if (command == "device") {
      int ordinal = 0;
      words >> ordinal;
      answer("device " + std::to_string(open_device(ordinal)));
    } else if (command == "launch") {
      std::string path;
      uint64_t ns = 0, count = 1;
      words >> path >> ns >> count;
      CUresult r = CUDA_SUCCESS;
      for (uint64_t i = 0; i < count && r == CUDA_SUCCESS; ++i)
        r = launch_once(path, ns);
      answer("launched " + std::to_string(r) + " " + std::to_string(now_ns()));
    } else if (command == "context") {
      answer("context " + std::to_string(create_context()));
    } else if (command == "sync") {
      const CUresult r = cuCtxSynchronize();
      answer("synced " + std::to_string(r) + " " + std::to_string(now_ns()));
    } else if (command == "begin-capture") {
      answer("capturing " +
             std::to_string(cuStreamBeginCapture(current->stream, CU_STREAM_CAPTURE_MODE_GLOBAL)));
    } else if (command == "end-capture") {
      uint64_t ns = 0;
      words >> ns;
      const CUresult launched = launch_once("kernel", ns);
      CUgraph graph = nullptr;
      const CUresult ended = cuStreamEndCapture(current->stream, &graph);
      answer("captured " + std::to_string(launched) + " " + std::to_string(ended) + " " +
             std::to_string(now_ns()));
    } else if (command == "storm") {
      int threads = 1;
      uint64_t milliseconds = 0, ns = 0;
      words >> threads >> milliseconds >> ns;
      answer(storm(threads, milliseconds, ns));
    } else if (command == "threads") {
      answer("threads " + std::to_string(thread_count()));
    } else if (command == "fork") {
      uint64_t ns = 0;
      words >> ns;
      std::cout.flush();
      const pid_t child = fork();
      if (child == 0) _exit(static_cast<int>(launch_once("kernel", ns)) & 0xff);
      int status = 0;
      waitpid(child, &status, 0);
      answer("child " + std::to_string(child) + " " +
             std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)));
    } else if (command == "exit") {
      break;
    } else {
      answer("unknown " + command);
    }
  }
  return 0;
}
