// What one CUDA runtime call costs on the host: cudart's own path (its
// context-local-storage lookup on every call that needs the current
// context) plus the driver call it makes, which gpulimit hooks when it is
// preloaded. Each case runs ITERATIONS calls after a warm-up and prints one
// line: the case, then nanoseconds per call (best of REPEATS).
//
//   runtime_call_cost [ITERATIONS] [REPEATS]
//
// cudaGetDevice           cudart only: no driver call
// cudaStreamQuery         cuStreamQuery on the legacy stream (not hooked:
//                         what gpulimit's dispatch costs a call it passes on)
// cudaEventRecord         cuEventRecord (not hooked, likewise)
// cudaLaunchKernel        an empty kernel: cuLaunchKernel (hooked: the
//                         launch gate), the kernel queued, not waited for
// cudaMemGetInfo          cuMemGetInfo (hooked: the cap replaces the total)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void empty_kernel() {}

namespace {

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "runtime_call_cost: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

template <typename Call>
double best_ns_per_call(long iterations, int repeats, Call call) {
  for (long i = 0; i < iterations / 10; ++i) call();
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < iterations; ++i) call();
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / static_cast<double>(iterations));
    cudaDeviceSynchronize();
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 200000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  if (iterations <= 0 || repeats <= 0) {
    std::fprintf(stderr, "usage: runtime_call_cost [ITERATIONS] [REPEATS]\n");
    return 2;
  }
  if (!ok(cudaSetDevice(0), "cudaSetDevice") || !ok(cudaFree(nullptr), "cudaFree(0)")) return 1;
  cudaEvent_t event;
  if (!ok(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate")) return 1;
  size_t free_bytes = 0, total_bytes = 0;
  bool failed = false;
  auto note = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess && e != cudaErrorNotReady && !failed) failed = !ok(e, what);
  };
  const struct {
    const char* name;
    double ns;
  } cases[] = {
      {"cudaGetDevice", best_ns_per_call(iterations, repeats, [&] {
         int device;
         note(cudaGetDevice(&device), "cudaGetDevice");
       })},
      {"cudaStreamQuery", best_ns_per_call(iterations, repeats,
                                           [&] { note(cudaStreamQuery(0), "cudaStreamQuery"); })},
      {"cudaEventRecord", best_ns_per_call(iterations, repeats,
                                           [&] { note(cudaEventRecord(event, 0), "cudaEventRecord"); })},
      {"cudaLaunchKernel", best_ns_per_call(iterations, repeats,
                                            [&] {
                                              empty_kernel<<<1, 1>>>();
                                              note(cudaGetLastError(), "cudaLaunchKernel");
                                            })},
      {"cudaMemGetInfo", best_ns_per_call(iterations, repeats, [&] {
         note(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
       })},
  };
  if (failed) return 1;
  for (const auto& c : cases) std::printf("%s %.1f\n", c.name, c.ns);
  return 0;
}
