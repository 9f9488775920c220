// The first CUDA call of a fresh process, timed: cuInit(0), which under a
// memory cap is where libgpulimit.so reads the limits, loads the driver's
// entry points and attaches the process to its tenant's ledger. Prints
// "init_ns=N result=R" and exits. bench_attach runs it many times, with and
// without the library preloaded.
#include <cuda.h>
#include <time.h>

#include <cstdint>
#include <cstdio>

namespace {

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

int main() {
  const uint64_t start = now_ns();
  const CUresult result = cuInit(0);
  const uint64_t end = now_ns();
  std::printf("init_ns=%llu result=%d\n", static_cast<unsigned long long>(end - start),
              static_cast<int>(result));
  return result == CUDA_SUCCESS ? 0 : 1;
}
