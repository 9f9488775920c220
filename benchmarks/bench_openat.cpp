// What gpulimitd's BPF watcher adds to every openat on the machine: the
// same open and close, with the programs attached and without. Run as root
// (the programs need it); tracefs must be mounted:
//     mount -t tracefs nodev /sys/kernel/tracing
//     build/benchmarks/bench_openat
// The "other path" case is what nearly every open on a machine pays (a
// 12-byte read and a prefix compare); the "GPU node" case is a tenant's own
// open of a node (the prefix matches, then the tenant map is looked up).
// Both also pay the lookup at the syscall's exit (paths unreadable at entry).
// An open by an unmanaged process also sends an event; it happens once or
// twice per process and is not measured.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "gpulimit/server/watcher/watcher.h"

namespace {

using gpulimit::server::GpuWatcher;

// Loaded by the first attached run, kept for the others (the detached runs
// are registered first, so they all run before it exists).
std::unique_ptr<GpuWatcher>& watcher() {
  static std::unique_ptr<GpuWatcher> loaded;
  return loaded;
}

bool attach(benchmark::State& state) {
  if (watcher()) return true;
  auto opened = GpuWatcher::open();
  if (!opened) {
    state.SkipWithError(("the BPF watcher cannot run: " + opened.error()).c_str());
    return false;
  }
  watcher() = std::move(*opened);
  // This process counts as a tenant: its GPU-node opens are filtered out.
  watcher()->track(::getpid());
  return true;
}

void open_and_close(benchmark::State& state, const char* path, bool attached) {
  if (attached && !attach(state)) return;
  for (auto _ : state) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    benchmark::DoNotOptimize(fd);
  }
}

// An ordinary file that exists, and a GPU node that may not (the attempt is
// what the tracepoint sees).
const char* ordinary_file() {
  static const std::string path = [] {
    char name[] = "/tmp/bench_openat-XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd >= 0) ::close(fd);
    return std::string(name);
  }();
  return path.c_str();
}
constexpr const char* kGpuNode = "/dev/nvidia0";

void BM_OtherPathDetached(benchmark::State& state) {
  open_and_close(state, ordinary_file(), false);
}
void BM_GpuNodeDetached(benchmark::State& state) {
  open_and_close(state, kGpuNode, false);
}
void BM_OtherPathAttached(benchmark::State& state) {
  open_and_close(state, ordinary_file(), true);
}
void BM_GpuNodeAttached(benchmark::State& state) {
  open_and_close(state, kGpuNode, true);
}

BENCHMARK(BM_OtherPathDetached);
BENCHMARK(BM_GpuNodeDetached);
BENCHMARK(BM_OtherPathAttached);
BENCHMARK(BM_GpuNodeAttached);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  watcher().reset();
  ::unlink(ordinary_file());
  return 0;
}
