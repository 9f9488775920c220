// The whole system on the simulated GPU: gpulimitd, and the spinner workload
// preloaded with libgpulimit.so as its tenants. The simulator's kernel trace
// is the ground truth for who used the GPU when. Shares are checked with
// margins a busy 2-core machine keeps; the figures are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gpulimit/testing/simulated_machine.h"
#include "gpulimit/testing/temporary_directory.h"
#include "gpulimit/trace/trace.h"
#include "server_process.h"

namespace server_test {
namespace {

namespace trace = gpulimit::trace;
using std::chrono::milliseconds;

constexpr milliseconds kSpinnerTimeout{60'000};

struct Tenant {
  std::string name;
  std::vector<std::string> limits;  // GPULIMIT_*=VALUE
};

class EndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    // 40 ms, so that a process reports Idle only after 10 ms without a
    // launch (a quarter quantum). With 10 ms, a launching thread that the
    // loaded test machine leaves asleep for 2.5 ms after its grant made its
    // process report Idle, and the launch gate, which sends Want once per
    // blocked launch, then waited with no Want pending: a hang seen in 1 of 3
    // full ctest runs.
    server_ = std::make_unique<ServerProcess>(dir_.path(),
                                              std::vector<std::string>{"--quantum-ms", "40"});
    ASSERT_TRUE(server_->wait_until_serving()) << server_->log();
  }

  // Spinners, one per tenant, started together; each launches 1 ms kernels
  // on 2 streams for `seconds`. Returns once all have finished.
  std::map<std::string, pid_t> run_spinners(const std::vector<Tenant>& tenants, int seconds) {
    std::map<std::string, gpulimit::testing::Process> spinners;
    for (const Tenant& tenant : tenants) {
      std::vector<std::string> environment = gpulimit::testing::assignments(
          gpulimit::testing::with(machine_.tenant_environment(dir_.path(), "", tenant.name),
                                  "GPULIMIT_SOCKET", server_->socket()));
      environment.insert(environment.end(), tenant.limits.begin(), tenant.limits.end());
      spinners[tenant.name] =
          spawn_program({WORKLOAD_SPINNER_PATH, "--seconds", std::to_string(seconds), "--kernel-ns",
                         "1000000", "--streams", "2", "--batch", "2"},
                        environment, dir_.path() + "/" + tenant.name + ".out");
    }
    std::map<std::string, pid_t> pids;
    for (auto& [name, spinner] : spinners) {
      EXPECT_EQ(wait_for_program(spinner, kSpinnerTimeout), 0) << output_of(name) << server_->log();
      pids[name] = spinner.pid();
    }
    return pids;
  }

  std::string output_of(const std::string& tenant) const {
    std::ifstream in(dir_.path() + "/" + tenant + ".out");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // The trace's report over the time every one of `pids` was running kernels.
  trace::Report report_while_all_ran(const std::map<std::string, pid_t>& pids) {
    const trace::ParseResult loaded = trace::load(machine_.trace_path());
    EXPECT_TRUE(loaded) << loaded.error().message();
    if (!loaded) return {};
    trace::AnalysisOptions options;
    int64_t from = 0;
    int64_t to = INT64_MAX;
    for (const auto& [name, pid] : pids) {
      options.tenants[name] = {pid};
      int64_t first = INT64_MAX;
      int64_t last = 0;
      for (const trace::KernelRecord& kernel : loaded->kernels) {
        if (kernel.pid != pid) continue;
        first = std::min(first, kernel.start_ns);
        last = std::max(last, kernel.end_ns);
      }
      from = std::max(from, first);
      to = std::min(to, last);
    }
    options.from_ns = from;
    options.to_ns = to;
    return trace::analyze(*loaded, options);
  }

  gpulimit::testing::TemporaryDirectory dir_;
  gpulimit::testing::SimulatedMachine machine_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(EndToEnd, TwoTenantsShareTheGpuByWeightAndNeverOverlap) {
  const auto pids =
      run_spinners({{"heavy", {"GPULIMIT_WEIGHT=3"}}, {"light", {"GPULIMIT_WEIGHT=1"}}}, 4);
  const trace::Report report = report_while_all_ran(pids);

  const double heavy = report.share_of_tenant("heavy");
  const double light = report.share_of_tenant("light");
  std::printf(
      "weights 3:1 over %.2f s: shares %.3f and %.3f (%.1f %% of the busy time to "
      "the heavy one), busy %.3f, %zu overlapping pairs\n",
      report.window.length_ns() / 1e9, heavy, light, 100 * heavy / (heavy + light),
      report.busy_fraction, report.overlaps.count);
  EXPECT_GT(report.window.length_ns(), 2'000'000'000) << "both spun together";
  EXPECT_EQ(report.overlaps.count, 0u);
  EXPECT_NEAR(heavy / (heavy + light), 0.75, 0.08) << server_->log();
  EXPECT_GT(report.busy_fraction, 0.85) << "handoffs leave the GPU idle little";
}

TEST_F(EndToEnd, AHardCapHoldsALoneTenantToItsShare) {
  const auto pids = run_spinners({{"capped", {"GPULIMIT_SM=30"}}}, 4);
  const trace::Report report = report_while_all_ran(pids);

  const double share = report.share_of_tenant("capped");
  std::printf("--sm 30 alone over %.2f s: share %.3f\n", report.window.length_ns() / 1e9, share);
  EXPECT_NEAR(share, 0.30, 0.05) << server_->log();
}

TEST_F(EndToEnd, ALoneTenantWithoutCapRunsUnthrottled) {
  const auto pids = run_spinners({{"alone", {}}}, 2);
  const trace::Report report = report_while_all_ran(pids);

  std::printf("alone over %.2f s: share %.3f\n", report.window.length_ns() / 1e9,
              report.share_of_tenant("alone"));
  EXPECT_GT(report.share_of_tenant("alone"), 0.9);
}

}  // namespace
}  // namespace server_test
