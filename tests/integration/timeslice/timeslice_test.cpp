// GPU time-slicing end to end: gpulimitd, the gpulimit command and
// libgpulimit.so's launch gate, with spinner tenants on one simulated GPU.
// The simulator's kernel trace is the ground truth: each tenant's share is
// the time its kernels ran, over a window in which every tenant wanted the
// GPU all the time.
//
// Shares are asserted to ±2 points over 5 s, as the design promises; the
// handoffs are exact by construction (token hold intervals never overlap),
// so noise on a small machine moves shares little.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpulimit/testing/server_listening.h"
#include "gpulimit/trace/analysis.h"
#include "gpulimit/trace/parse.h"
#include "simulated_machine.h"
#include "workload_process.h"

namespace integration {
namespace {

using namespace std::chrono_literals;

const std::string kServer = GPULIMITD_PATH;
const std::string kCli = GPULIMIT_CLI_PATH;
constexpr int64_t kMillisecond = 1'000'000;
constexpr int kQuantumMs = 20;
constexpr double kTolerance = 0.02;  // ±2 percentage points
// The least fraction of the time the GPU may idle with work waiting. Under
// ThreadSanitizer every handoff's drain and grant runs several times slower
// and the 2-core machine is shared with its runtime's work: the figure is a
// goal of the plain build there (benchmarks/ measures it), and the sanitized
// run checks only that handoffs do not stall.
#ifdef GPULIMIT_THREAD_SANITIZER
constexpr double kBusyGoal = 0.85;
#else
constexpr double kBusyGoal = 0.95;
#endif

// A spinner that wants the GPU all the time for `seconds`: 1 ms kernels, two
// rounds queued on one stream.
std::vector<std::string> spinning_for(double seconds, const std::string& launch = "kernel") {
  std::vector<std::string> args = {
      kSpinner, "--launch", launch, "--kernel-ns", "1000000", "--seconds", std::to_string(seconds)};
  if (launch.starts_with("graph")) args.insert(args.end(), {"--batch", "4"});
  return args;
}

// A tenant's share of the GPU time used in the report's window: what
// weights divide. (Handoffs leave the GPU idle for a moment, and more so on
// a loaded machine; that time is nobody's.)
double gpu_share(const gpulimit::trace::Report& report, std::string_view tenant) {
  return report.busy_fraction > 0 ? report.share_of_tenant(tenant) / report.busy_fraction : 0;
}

class TimeSlicing : public testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start_server()); }

  // gpulimitd on this test's socket, in the foreground so that the test owns
  // the process (and its destructor ends it).
  void start_server() {
    server_ = std::make_unique<WorkloadProcess>(
        kServer,
        std::vector<std::string>{"--foreground", "--socket", socket_path(), "--quantum-ms",
                                 std::to_string(kQuantumMs), "--idle-exit-s", "600"},
        machine_.environment());
    ASSERT_TRUE(server_->started());
    // Wait for the server to listen: a condition, not a timing assumption.
    std::string error;
    ASSERT_TRUE(gpulimit::testing::wait_until_listening(socket_path(), 20s, error))
        << "gpulimitd never listened: " << error;
  }

  std::string socket_path() const { return sockets_.path() + "/gpulimitd.sock"; }

  // Starts `command` as a new tenant under `gpulimit FLAGS --`.
  WorkloadProcess& start_tenant(const std::string& name, std::vector<std::string> flags,
                                const std::vector<std::string>& command) {
    Environment env = machine_.environment();
    env = with(env, "GPULIMIT_SOCKET", socket_path());
    env = with(env, "GPULIMIT_LEDGER_DIR", ledgers_.path());
    env = with(env, "GPULIMIT_LIBRARY", kLibrary);
    env = with(env, "ASAN_OPTIONS", "verify_asan_link_order=0");
    flags.push_back("--");
    flags.insert(flags.end(), command.begin(), command.end());
    tenants_.push_back(std::make_unique<WorkloadProcess>(kCli, flags, env));
    names_.push_back(name);
    pids_.push_back(tenants_.back()->pid());  // gone from the process once waited for
    return *tenants_.back();
  }

  // Waits for every tenant; each must have run its workload successfully.
  void finish_tenants() {
    for (size_t i = 0; i < tenants_.size(); ++i) {
      runs_.push_back(tenants_[i]->wait(120s));
      ASSERT_EQ(runs_.back().exit_status, 0) << names_[i] << ": " << runs_.back().describe();
    }
  }

  gpulimit::trace::Trace trace() const {
    auto loaded = gpulimit::trace::load(machine_trace_path());
    EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : loaded.error().message());
    return loaded.ok() ? *std::move(loaded) : gpulimit::trace::Trace{};
  }
  std::string machine_trace_path() const {
    for (const auto& [key, value] : machine_.environment())
      if (key == "FAKECUDA_TRACE") return value;
    return {};
  }

  // Tenant name -> pids. A tenant's pid is its gpulimit's (which becomes the
  // command); pids in the trace that belong to no started tenant are the
  // children of `parent_of_the_rest`, when named.
  gpulimit::trace::TenantMap tenant_map(const gpulimit::trace::Trace& t,
                                        const std::string& parent_of_the_rest = "") const {
    gpulimit::trace::TenantMap map;
    for (size_t i = 0; i < tenants_.size(); ++i)
      map[names_[i]].insert(pids_[i]);
    if (!parent_of_the_rest.empty()) {
      for (const auto& kernel : t.kernels) {
        bool known = false;
        for (const auto& [name, pids] : map)
          known = known || pids.contains(kernel.pid);
        if (!known) map[parent_of_the_rest].insert(kernel.pid);
      }
    }
    return map;
  }

  // The analysis over the time every tenant was running kernels, less
  // `margin` at each end (start-up and wind-down are not steady state).
  gpulimit::trace::Report steady_state(const gpulimit::trace::Trace& t,
                                       const gpulimit::trace::TenantMap& map,
                                       int64_t margin = 300 * kMillisecond) const {
    int64_t from = std::numeric_limits<int64_t>::min();
    int64_t to = std::numeric_limits<int64_t>::max();
    for (const auto& [name, pids] : map) {
      int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
      for (const auto& kernel : t.kernels) {
        if (!pids.contains(kernel.pid)) continue;
        first = std::min(first, kernel.start_ns);
        last = std::max(last, kernel.end_ns);
      }
      from = std::max(from, first);
      to = std::min(to, last);
    }
    auto report = gpulimit::trace::analyze(
        t, {.device = 0, .from_ns = from + margin, .to_ns = to - margin, .tenants = map});
    // The measured figures, for benchmarks/README.md.
    std::printf("[ measured ] window %.2f s, busy %.4f, overlaps %zu, shares:",
                static_cast<double>(report.window.length_ns()) / 1e9, report.busy_fraction,
                report.overlaps.count);
    for (const auto& tenant : report.tenants)
      std::printf(" %s=%.4f", tenant.name.c_str(), tenant.share);
    std::printf("\n");
    return report;
  }

  // Loads the trace, names its tenants (tenant_map) and analyses their
  // steady state (steady_state), keeping the trace and the map for
  // expect_time_sliced().
  gpulimit::trace::Report analyze_tenants(const std::string& parent_of_the_rest = "") {
    trace_ = trace();
    map_ = tenant_map(trace_, parent_of_the_rest);
    return steady_state(trace_, map_);
  }

  // Time-slicing, as the trace shows it: tenants take the GPU in turns of
  // about a quantum, never kernel by kernel (which is what the simulator's
  // one shared timeline does with nothing in between), and no two tenants'
  // kernels run at once (the simulator serialises kernels anyway; on a real
  // GPU's trace this is the check that matters).
  void expect_time_sliced(const gpulimit::trace::Report& report) const {
    const gpulimit::trace::Trace& t = trace_;
    const gpulimit::trace::TenantMap& map = map_;
    EXPECT_EQ(report.overlaps.count, 0u)
        << "kernels of different tenants ran at once, first at "
        << (report.overlaps.examples.empty() ? 0 : report.overlaps.examples[0].later.start_ns);
    auto tenant_of = [&](pid_t pid) -> const std::string* {
      for (const auto& [name, pids] : map)
        if (pids.contains(pid)) return &name;
      return nullptr;
    };
    size_t turns = 0;
    const std::string* previous = nullptr;
    for (const auto& kernel : t.kernels) {
      if (kernel.start_ns < report.window.from_ns || kernel.end_ns > report.window.to_ns) continue;
      const std::string* tenant = tenant_of(kernel.pid);
      if (tenant != previous) ++turns;
      previous = tenant;
    }
    // The GPU's idle gap at each change of tenant: the holder's last kernel
    // ends, it acknowledges, the server grants, the next tenant wakes and
    // launches, its kernel starts.
    std::vector<int64_t> gaps;
    const gpulimit::trace::KernelRecord* last = nullptr;
    for (const auto& kernel : t.kernels) {
      if (kernel.start_ns < report.window.from_ns || kernel.end_ns > report.window.to_ns) continue;
      if (last && tenant_of(last->pid) != tenant_of(kernel.pid))
        gaps.push_back(kernel.start_ns - last->end_ns);
      last = &kernel;
    }
    std::sort(gaps.begin(), gaps.end());
    if (!gaps.empty())
      std::printf("[ measured ] handoff gap p50 %.1f us, p99 %.1f us over %zu handoffs\n",
                  static_cast<double>(gaps[gaps.size() / 2]) / 1e3,
                  static_cast<double>(gaps[gaps.size() * 99 / 100]) / 1e3, gaps.size());
    const double quanta = static_cast<double>(report.window.length_ns()) / (kQuantumMs * 1e6);
    std::printf("[ measured ] %zu turns in %.0f quanta\n", turns, quanta);
    EXPECT_LE(static_cast<double>(turns), 1.5 * quanta + 4)
        << "tenants changed more often than once a quantum";
  }

  SimulatedMachine machine_{"8G"};
  TemporaryDirectory sockets_;
  TemporaryDirectory ledgers_;
  std::unique_ptr<WorkloadProcess> server_;
  std::vector<std::unique_ptr<WorkloadProcess>> tenants_;
  std::vector<std::string> names_;
  std::vector<pid_t> pids_;
  std::vector<WorkloadRun> runs_;
  gpulimit::trace::Trace trace_;    // as analyze_tenants() loaded it
  gpulimit::trace::TenantMap map_;  // as analyze_tenants() named it
};

TEST_F(TimeSlicing, EqualWeightsShareEqually) {
  start_tenant("a", {"--weight", "1"}, spinning_for(5.6));
  start_tenant("b", {"--weight", "1"}, spinning_for(5.6));
  finish_tenants();

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  EXPECT_NEAR(gpu_share(report, "a"), 0.5, kTolerance);
  EXPECT_NEAR(gpu_share(report, "b"), 0.5, kTolerance);
  expect_time_sliced(report);
  EXPECT_GE(report.busy_fraction, kBusyGoal) << "the GPU idled with work waiting";
}

TEST_F(TimeSlicing, WeightsThreeToOne) {
  start_tenant("heavy", {"--weight", "3"}, spinning_for(5.6));
  start_tenant("light", {"--weight", "1"}, spinning_for(5.6));
  finish_tenants();

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  EXPECT_NEAR(gpu_share(report, "heavy"), 0.75, kTolerance);
  EXPECT_NEAR(gpu_share(report, "light"), 0.25, kTolerance);
  expect_time_sliced(report);
  EXPECT_GE(report.busy_fraction, kBusyGoal);
}

TEST_F(TimeSlicing, FourTenantsByTheirWeights) {
  const std::vector<std::pair<std::string, int>> weights = {
      {"w1a", 1}, {"w1b", 1}, {"w2", 2}, {"w4", 4}};
  for (const auto& [name, weight] : weights)
    start_tenant(name, {"--weight", std::to_string(weight)}, spinning_for(5.6));
  finish_tenants();

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  for (const auto& [name, weight] : weights)
    EXPECT_NEAR(gpu_share(report, name), weight / 8.0, kTolerance) << name;
  expect_time_sliced(report);
  EXPECT_GE(report.busy_fraction, kBusyGoal);
}

TEST_F(TimeSlicing, EightTenantsEqually) {
  for (int i = 0; i < 8; ++i)
    start_tenant("t" + std::to_string(i), {}, spinning_for(5.6));
  finish_tenants();

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(gpu_share(report, "t" + std::to_string(i)), 1.0 / 8, kTolerance) << i;
  expect_time_sliced(report);
  EXPECT_GE(report.busy_fraction, kBusyGoal);
}

TEST_F(TimeSlicing, ALoneTenantWithAHardCapGetsItsCapOfAnIdleGpu) {
  start_tenant("capped", {"--sm", "30"}, spinning_for(5.6));
  finish_tenants();

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  EXPECT_NEAR(report.share_of_tenant("capped"), 0.30, kTolerance);
}

// A cap is a ceiling, not a reservation: with equal weights each tenant
// would get a third; the 30 % cap binds, the 50 % one does not, and what the
// capped tenants leave goes to the others in proportion to their weights.
TEST_F(TimeSlicing, CapsHoldAndTheRestGoesToTheOthers) {
  start_tenant("cap30", {"--sm", "30"}, spinning_for(5.6));
  start_tenant("cap50", {"--sm", "50"}, spinning_for(5.6));
  start_tenant("free", {}, spinning_for(5.6));
  finish_tenants();

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  EXPECT_NEAR(report.share_of_tenant("cap30"), 0.30, kTolerance);
  EXPECT_LE(report.share_of_tenant("cap50"), 0.50 + kTolerance);
  EXPECT_NEAR(gpu_share(report, "cap50"), gpu_share(report, "free"), kTolerance);
  EXPECT_GE(report.busy_fraction, kBusyGoal) << "capped tenants left the GPU idle";
  expect_time_sliced(report);
}

// Capped tenants that would take more by their weights: both caps bind, and
// the rest of the GPU goes to the uncapped tenant.
TEST_F(TimeSlicing, CapsHoldAndTheRestGoesToTheUncapped) {
  start_tenant("cap30", {"--sm", "30", "--weight", "10"}, spinning_for(5.6));
  start_tenant("cap50", {"--sm", "50", "--weight", "10"}, spinning_for(5.6));
  start_tenant("free", {}, spinning_for(5.6));
  finish_tenants();

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  EXPECT_NEAR(report.share_of_tenant("cap30"), 0.30, kTolerance);
  EXPECT_NEAR(report.share_of_tenant("cap50"), 0.50, kTolerance);
  EXPECT_NEAR(report.share_of_tenant("free"), 0.20, kTolerance);
  EXPECT_GE(report.busy_fraction, kBusyGoal);
  expect_time_sliced(report);
}

TEST_F(TimeSlicing, TheProcessesOfOneTenantShareOneToken) {
  // Two spinners in one tenant (a shell starts both), one in the other.
  std::string script;
  for (const auto& word : spinning_for(5.6))
    script += "'" + word + "' ";
  start_tenant("single", {"--weight", "1"}, spinning_for(5.6));
  start_tenant("pair", {"--weight", "1"}, {"/bin/sh", "-c", script + "& " + script + "; wait"});
  finish_tenants();

  const auto report = analyze_tenants("pair");
  ASSERT_EQ(map_.at("pair").size(), 3u) << "the shell and its two spinners";
  ASSERT_GE(report.window.length_ns(), 3500 * kMillisecond);
  EXPECT_NEAR(gpu_share(report, "single"), 0.5, kTolerance);
  EXPECT_NEAR(gpu_share(report, "pair"), 0.5, kTolerance);
  expect_time_sliced(report);
}

TEST_F(TimeSlicing, GraphLaunchesAreThrottledLikeKernels) {
  start_tenant("heavy", {"--weight", "3"}, spinning_for(5.6, "graph-capture"));
  start_tenant("light", {"--weight", "1"}, spinning_for(5.6, "graph-capture"));
  finish_tenants();

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  EXPECT_NEAR(gpu_share(report, "heavy"), 0.75, kTolerance);
  EXPECT_NEAR(gpu_share(report, "light"), 0.25, kTolerance);
  expect_time_sliced(report);
}

TEST_F(TimeSlicing, AHighPriorityArrivalStartsWithinOneQuantumAndTheLongestKernel) {
  start_tenant("a", {}, spinning_for(4));
  start_tenant("b", {}, spinning_for(4));
  // Let both settle into taking turns before the urgent one arrives.
  std::this_thread::sleep_for(1500ms);
  // 20 kernels of 1 ms, one at a time: alone on the GPU it takes 20 ms.
  start_tenant("urgent", {"--priority", "high"},
               {kSpinner, "--kernel-ns", "1000000", "--kernels", "20"});
  finish_tenants();

  // From its first launch to its last kernel's end: at most one quantum of
  // waiting for the holder to give the token back, the longest kernel (1 ms)
  // to drain, its own 20 ms, and scheduling noise of a small machine.
  const WorkloadRun& run = runs_[2];
  const int64_t budget = (kQuantumMs + 1 + 20) * kMillisecond + 60 * kMillisecond;
  std::printf("[ measured ] urgent tenant: first launch to last kernel %.1f ms\n",
              static_cast<double>(run.report.number("wall_ns")) / 1e6);
  EXPECT_LE(static_cast<int64_t>(run.report.number("wall_ns")), budget) << run.describe();
}

}  // namespace
}  // namespace integration

namespace integration {
namespace {

int64_t monotonic_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // the simulator's trace clock
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// A tenant dies holding the token: the others carry on and take the GPU.
TEST_F(TimeSlicing, AKilledTenantLeavesTheGpuToTheOthers) {
  WorkloadProcess& victim = start_tenant("victim", {"--weight", "3"}, spinning_for(30));
  start_tenant("survivor", {"--weight", "1"}, spinning_for(4));
  std::this_thread::sleep_for(1500ms);
  victim.kill_now();
  const int64_t killed_at = monotonic_ns();
  const WorkloadRun survivor = tenants_[1]->wait(120s);
  ASSERT_EQ(survivor.exit_status, 0) << survivor.describe();

  const auto t = trace();
  const auto map = tenant_map(t);
  const auto report = gpulimit::trace::analyze(t, {.device = 0,
                                                   .from_ns = killed_at + 300 * kMillisecond,
                                                   .to_ns = killed_at + 2000 * kMillisecond,
                                                   .tenants = map});
  EXPECT_GE(report.share_of_tenant("survivor"), 0.95) << "the survivor did not get the GPU";
}

// gpulimitd is SIGKILLed while two tenants run: they go on (ungated),
// memory caps still hold, and once a server is back on the socket the
// tenants attach to it and share by their weights again.
TEST_F(TimeSlicing, AKilledServerStopsNothingAndSharesResumeWithTheNext) {
  start_tenant("heavy", {"--weight", "3"}, spinning_for(7));
  start_tenant("light", {"--weight", "1"}, spinning_for(7));
  std::this_thread::sleep_for(1500ms);
  server_->kill_now();

  // A memory cap without a server: the ledger needs none.
  WorkloadProcess& capped =
      start_tenant("capped", {"--mem", "512M"},
                   {kAllocator, "--path", "linear", "--target", "1G", "--chunk", "64M"});
  const WorkloadRun capped_run = capped.wait(60s);
  ASSERT_EQ(capped_run.exit_status, 0) << capped_run.describe();
  EXPECT_EQ(capped_run.report.number("bytes"), 512ull << 20) << capped_run.describe();
  EXPECT_EQ(capped_run.report.text("error"), "CUDA_ERROR_OUT_OF_MEMORY");

  ASSERT_NO_FATAL_FAILURE(start_server());
  const int64_t restarted_at = monotonic_ns();
  for (size_t i = 0; i < 2; ++i) {
    const WorkloadRun run = tenants_[i]->wait(120s);
    ASSERT_EQ(run.exit_status, 0) << names_[i] << ": " << run.describe();
  }

  // The tenants notice the new server's socket and attach again: give them
  // a second, then look at the shares until the first of them ends.
  const auto t = trace();
  gpulimit::trace::TenantMap map;
  map["heavy"].insert(pids_[0]);
  map["light"].insert(pids_[1]);
  int64_t last_heavy = 0, last_light = 0;
  for (const auto& kernel : t.kernels) {
    if (kernel.pid == pids_[0]) last_heavy = std::max(last_heavy, kernel.end_ns);
    if (kernel.pid == pids_[1]) last_light = std::max(last_light, kernel.end_ns);
  }
  const auto report =
      gpulimit::trace::analyze(t, {.device = 0,
                                   .from_ns = restarted_at + 1000 * kMillisecond,
                                   .to_ns = std::min(last_heavy, last_light) - 300 * kMillisecond,
                                   .tenants = map});
  ASSERT_GE(report.window.length_ns(), 1500 * kMillisecond);
  std::printf("[ measured ] after the restart: heavy %.4f light %.4f of the GPU time\n",
              gpu_share(report, "heavy"), gpu_share(report, "light"));
  // A shorter window than the share tests', hence a wider tolerance.
  EXPECT_NEAR(gpu_share(report, "heavy"), 0.75, 0.03);
  EXPECT_NEAR(gpu_share(report, "light"), 0.25, 0.03);
}

// A kernel far longer than the ack timeout: the holder cannot drain in
// time, and the server gives the token to the next tenant anyway (the one
// case where two tenants' kernels may run at once on a real GPU; the
// simulator still runs them one after the other). Nobody waits forever.
TEST_F(TimeSlicing, AKernelLongerThanTheAckTimeoutStallsNobodyForever) {
  start_tenant("long", {}, {kSpinner, "--kernel-ns", "600000000", "--kernels", "4"});
  start_tenant("short", {}, spinning_for(2));
  finish_tenants();

  const WorkloadRun& short_run = runs_[1];
  std::printf("[ measured ] short tenant beside 600 ms kernels: %.1f ms for 2 s of launching\n",
              static_cast<double>(short_run.report.number("wall_ns")) / 1e6);
  EXPECT_GT(short_run.report.number("kernels"), 0u);
}

}  // namespace
}  // namespace integration
