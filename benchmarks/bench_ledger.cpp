// What the tenant memory ledger's hot path costs (shm/): a reserve and the
// release that gives it back, on one thread and on eight racing for the same
// device's used word. Eight threads of one process share one slot (its
// in-flight count and held words); eight "processes", here eight ledgers
// opened in this process, each have their own. Within a lease: the same
// pair where a group's and a user's memory_total bind the tenant too (the
// server folds every total into the one lease, in a lease page mapped
// read-only as a tenant maps it), so this is what a reservation against
// three totals (its own cap, its user's, its group's) costs.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gpulimit/shm/lease_page.h"
#include "gpulimit/shm/tenant_ledger.h"

namespace {

using gpulimit::shm::TenantLedger;

constexpr int kMaxThreads = 8;
constexpr uint64_t kBytes = 2 << 20;

// The ledgers every benchmark uses: one file in a fresh directory of
// /dev/shm, where the ledger lives by default, and one ledger per thread.
struct BenchLedgers {
  std::string dir;
  std::vector<std::unique_ptr<TenantLedger>> processes;
  int dev = -1;
  std::unique_ptr<gpulimit::shm::LeasePage> server_page;
  std::unique_ptr<gpulimit::shm::LeasePage> leases;  // mapped read-only
};

BenchLedgers* ledgers = nullptr;

void BM_ReserveRelease(benchmark::State& state) {
  TenantLedger& ledger = *ledgers->processes[0];
  for (auto _ : state) {
    benchmark::DoNotOptimize(ledger.reserve(ledgers->dev, kBytes));
    ledger.release(ledgers->dev, kBytes);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReserveRelease)->Threads(1)->Threads(kMaxThreads)->UseRealTime();

void BM_ReserveReleaseOneProcessPerThread(benchmark::State& state) {
  TenantLedger& ledger = *ledgers->processes[static_cast<size_t>(state.thread_index())];
  for (auto _ : state) {
    benchmark::DoNotOptimize(ledger.reserve(ledgers->dev, kBytes));
    ledger.release(ledgers->dev, kBytes);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReserveReleaseOneProcessPerThread)->Threads(1)->Threads(kMaxThreads)->UseRealTime();

void BM_ReserveReleaseWithinLease(benchmark::State& state) {
  TenantLedger& ledger = *ledgers->processes[0];
  const std::atomic<uint64_t>& lease = ledgers->leases->device(0).lease;
  uint64_t need = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ledger.reserve_within(ledgers->dev, kBytes, lease, &need));
    ledger.release(ledgers->dev, kBytes);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReserveReleaseWithinLease)->Threads(1)->Threads(kMaxThreads)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  char pattern[] = "/dev/shm/gpulimit-bench-XXXXXX";
  if (!mkdtemp(pattern)) {
    std::perror("mkdtemp");
    return 1;
  }
  BenchLedgers setup;
  setup.dir = pattern;
  for (int i = 0; i < kMaxThreads; ++i) {
    std::string error;
    setup.processes.push_back(TenantLedger::open(setup.dir, "bench", error));
    if (!setup.processes.back()) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 1;
    }
  }
  const unsigned char uuid[16] = {'b', 'e', 'n', 'c', 'h'};
  setup.dev = setup.processes[0]->device(uuid, uint64_t{1} << 40);
  std::string error;
  setup.server_page = gpulimit::shm::LeasePage::create(1, error);
  const int lease_fd = setup.server_page ? setup.server_page->read_only_descriptor() : -1;
  if (lease_fd >= 0) setup.leases = gpulimit::shm::LeasePage::map_read_only(lease_fd, error);
  if (!setup.leases) {
    std::fprintf(stderr, "lease page: %s\n", error.c_str());
    return 1;
  }
  setup.server_page->set_lease(0, uint64_t{1} << 39);  // room for every thread's 2 MiB
  ledgers = &setup;

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  setup.processes.clear();
  std::error_code ignored;
  std::filesystem::remove_all(setup.dir, ignored);
  return 0;
}
