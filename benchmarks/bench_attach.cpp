// Time from the first CUDA call to attached: each iteration starts a fresh
// process (attach_probe) that times its own cuInit, on the simulated driver,
// and that time is the iteration's (manual time). Rows: the driver alone;
// libgpulimit.so preloaded without a limit (a pass-through); preloaded under a
// memory cap (so cuInit attaches to the tenant's ledger) as
//   - a new tenant's first process, which creates the ledger file;
//   - a process joining a tenant that has a live process (this benchmark
//     stays attached to it), reaping the previous probe's slot on the way;
//   - the next process of a tenant whose processes have all ended, whose
//     ledger is rebuilt.
// The process's whole life, spawn to exit, is the counter process_us.
#include <benchmark/benchmark.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpulimit/shm/tenant_ledger.h"

extern char** environ;

namespace {

enum class Setup {
  kDirect,
  kPreloadedNoLimit,
  kLimitedNewTenant,
  kLimitedLiveTenant,
  kLimitedEndedTenant,
};

// Where the simulator's state and the ledgers live, for this run: in
// /dev/shm, the ledgers' default directory (a disk file system makes the
// ledger's creation and rebuild slower).
const std::string& work_dir() {
  static const std::string dir = [] {
    char pattern[] = "/dev/shm/gpulimit-bench-attach-XXXXXX";
    if (!mkdtemp(pattern)) std::abort();
    return std::string(pattern);
  }();
  return dir;
}

std::vector<std::string> environment(Setup setup, const std::string& tenant) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry; ++entry) {
    const std::string variable = *entry;
    if (variable.starts_with("LD_PRELOAD=") || variable.starts_with("GPULIMIT_") ||
        variable.starts_with("CUDA_DEVICE_MEMORY_LIMIT") || variable.starts_with("FAKECUDA_"))
      continue;
    env.push_back(variable);
  }
  env.push_back("FAKECUDA_STATE=" + work_dir() + "/fakecuda.state");
  if (setup == Setup::kDirect) return env;
  env.push_back(std::string("LD_PRELOAD=") + GPULIMIT_LIBRARY);
  if (setup == Setup::kPreloadedNoLimit) return env;
  env.push_back("GPULIMIT_MEM=8G");
  env.push_back("GPULIMIT_LEDGER_DIR=" + work_dir());
  env.push_back("GPULIMIT_TENANT=" + tenant);
  return env;
}

struct ProbeRun {
  uint64_t init_ns = 0;
  double process_seconds = 0;
};

// Runs the probe once; aborts the benchmark on any failure.
ProbeRun run_probe(const std::vector<std::string>& env_text) {
  std::vector<char*> envp;
  for (const std::string& variable : env_text)
    envp.push_back(const_cast<char*>(variable.c_str()));
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(ATTACH_PROBE), nullptr};

  int out[2];
  if (pipe(out) != 0) std::abort();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  if (posix_spawn(&pid, ATTACH_PROBE, &actions, nullptr, argv, envp.data()) != 0) std::abort();
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string text;
  char buffer[128];
  for (ssize_t n; (n = read(out[0], buffer, sizeof(buffer))) != 0;)
    if (n > 0) text.append(buffer, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const auto end = std::chrono::steady_clock::now();

  unsigned long long init_ns = 0;
  int result = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      std::sscanf(text.c_str(), "init_ns=%llu result=%d", &init_ns, &result) != 2 || result != 0) {
    std::fprintf(stderr, "attach_probe failed (status %d): %s\n", status, text.c_str());
    std::abort();
  }
  return {init_ns, std::chrono::duration<double>(end - start).count()};
}

void BM_FirstCall(benchmark::State& state, Setup setup) {
  uint64_t tenants = 0;
  double process_seconds = 0;
  std::unique_ptr<gpulimit::shm::TenantLedger> live;
  if (setup == Setup::kLimitedLiveTenant) {
    std::string error;
    live = gpulimit::shm::TenantLedger::open(work_dir(), "bench-attach-live", error);
    if (!live) {
      state.SkipWithError(error.c_str());
      return;
    }
  }
  for (auto _ : state) {
    std::string tenant = "bench-attach";
    if (setup == Setup::kLimitedNewTenant) tenant += "-" + std::to_string(++tenants);
    if (setup == Setup::kLimitedLiveTenant) tenant += "-live";
    const ProbeRun run = run_probe(environment(setup, tenant));
    state.SetIterationTime(static_cast<double>(run.init_ns) * 1e-9);
    process_seconds += run.process_seconds;
    if (setup == Setup::kLimitedNewTenant) {
      // The job ended: its ledger goes, as the CLI's sweep would remove it.
      unlink(gpulimit::shm::TenantLedger::path_for(work_dir(), geteuid(), tenant).c_str());
    }
  }
  state.counters["process_us"] =
      benchmark::Counter(process_seconds * 1e6, benchmark::Counter::kAvgIterations);
}

BENCHMARK_CAPTURE(BM_FirstCall, direct, Setup::kDirect)
    ->Name("FirstCall/cuInit_direct")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FirstCall, preloaded_no_limit, Setup::kPreloadedNoLimit)
    ->Name("FirstCall/cuInit_preloaded_no_limit")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FirstCall, limited_new_tenant, Setup::kLimitedNewTenant)
    ->Name("FirstCall/cuInit_limited_new_tenant")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FirstCall, limited_live_tenant, Setup::kLimitedLiveTenant)
    ->Name("FirstCall/cuInit_limited_live_tenant")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FirstCall, limited_ended_tenant, Setup::kLimitedEndedTenant)
    ->Name("FirstCall/cuInit_limited_ended_tenant")
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::system(("rm -rf " + work_dir()).c_str());
  return 0;
}
