// gpulimit's memory cap, end to end: workloads run with libgpulimit.so
// preloaded on the simulated GPU, through every access path the library
// hooks, alone and as several processes of one tenant.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>

#include "simulated_machine.h"
#include "test_parameters.h"
#include "workload_process.h"

namespace integration {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

class MemoryCap : public testing::Test {
 protected:
  Environment tenant(const std::string& mem, const std::string& id = "cap-test") const {
    return machine_.tenant_environment(ledgers_.path(), mem, id);
  }
  WorkloadRun run(const std::vector<std::string>& args, const Environment& env) {
    WorkloadProcess process(kAllocator, args, env);
    return process.wait(60s);
  }
  SimulatedMachine machine_{"4G"};
  TemporaryDirectory ledgers_;
};

// What the counted paths look like through each access path and stream mode.
class MemoryCapPath
    : public MemoryCap,
      public testing::WithParamInterface<std::tuple<std::string, std::string, std::string>> {};

TEST_P(MemoryCapPath, StopsAtTheCapGivesBackAndAllocatesAgain) {
  const auto& [path, access, stream_mode] = GetParam();
  WorkloadRun sut = run({"--path", path, "--target", "3G", "--chunk", "64M", "--retry", "--access",
                         access, "--stream-mode", stream_mode},
                        tenant("1G"));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  EXPECT_EQ(report.text("error"), "CUDA_ERROR_OUT_OF_MEMORY") << sut.describe();
  if (path == "mipmap") {
    // A chunk is a whole mip chain (its levels add a third), so the last one
    // that fits leaves some of the cap unused.
    EXPECT_LE(report.number("bytes"), kGiB) << sut.describe();
    EXPECT_LT(report.number("free_after_alloc"), 128 * kMiB) << sut.describe();
  } else {
    EXPECT_EQ(report.number("bytes"), kGiB) << "16 chunks of 64M fill a 1G cap exactly";
    EXPECT_EQ(report.number("free_after_alloc"), 0u);
  }
  EXPECT_EQ(report.number("total"), kGiB) << "cuMemGetInfo reports the cap as the total";
  EXPECT_EQ(report.number("free_before"), kGiB);
  EXPECT_EQ(report.number("free_after_free"), kGiB);
  EXPECT_EQ(report.number("retry_bytes"), report.number("bytes"))
      << "what was freed can be allocated again";
}

INSTANTIATE_TEST_SUITE_P(CountedPaths, MemoryCapPath,
                         testing::Combine(testing::ValuesIn(kAllocationPaths),
                                          testing::ValuesIn(kAccessPaths),
                                          testing::ValuesIn(kStreamModes)),
                         PathNamer());

TEST_F(MemoryCap, WithoutALimitTheLibraryChangesNothing) {
  // Each workload runs bare, then preloaded with no limit: alone, and with
  // the tenant's other variables set. Output, driver results (errors
  // included) and exit status must be the same, and nothing is attached.
  struct Workload {
    std::string program;
    std::vector<std::string> args;
  };
  const Workload workloads[] = {
      {kAllocator, {"--path", "linear", "--target", "2G", "--chunk", "256M"}},
      // The driver itself refuses: 8G of a 4G device.
      {kAllocator,
       {"--path", "vmm", "--access", "proc-v2", "--target", "8G", "--chunk", "512M", "--retry"}},
      {kAllocator,
       {"--path", "async", "--access", "dlsym", "--stream-mode", "per-thread", "--target", "1G",
        "--chunk", "128M", "--retry"}},
      {kAllocator, {"--path", "mipmap", "--access", "proc", "--target", "1G", "--chunk", "128M"}},
      {kAllocator, {"--path", "pool", "--target", "6G", "--chunk", "1G"}},
      {kAllocator, {"--info"}},
      {kDeviceViews, {"--alloc", "0", "512M"}},
  };
  Environment preloaded = with(machine_.environment(), "LD_PRELOAD", kLibrary);
  preloaded = with(preloaded, "ASAN_OPTIONS", "verify_asan_link_order=0");
  for (const Workload& workload : workloads) {
    SCOPED_TRACE(testing::PrintToString(workload.args));
    const WorkloadRun bare = run_workload(workload.program, workload.args, machine_.environment());
    ASSERT_EQ(bare.exit_status, 0) << bare.describe();
    for (const Environment& env : {preloaded, tenant("")}) {
      const WorkloadRun hooked = run_workload(workload.program, workload.args, env);
      EXPECT_EQ(hooked.exit_status, bare.exit_status) << hooked.describe();
      EXPECT_EQ(hooked.out, bare.out);
      EXPECT_EQ(hooked.err, bare.err);
    }
  }

  // Launches: the spinner's counts (its times differ from run to run).
  const std::vector<std::string> spin = {
      "--launch", "graph-capture", "--batch", "4",           "--streams",
      "2",        "--kernels",     "16",      "--kernel-ns", "1000"};
  const WorkloadRun bare = run_workload(kSpinner, spin, machine_.environment());
  const WorkloadRun hooked = run_workload(kSpinner, spin, tenant(""));
  ASSERT_EQ(bare.exit_status, 0) << bare.describe();
  ASSERT_EQ(hooked.exit_status, 0) << hooked.describe();
  for (const char* key : {"launches", "kernels", "stream_kernels"})
    EXPECT_EQ(hooked.report.text(key), bare.report.text(key)) << key;
  EXPECT_EQ(hooked.err, "");

  EXPECT_TRUE(std::filesystem::is_empty(ledgers_.path())) << "no ledger: nothing attached";
}

TEST_F(MemoryCap, PercentOfTheDeviceAndTheHamiAlias) {
  WorkloadRun quarter = run({"--info"}, tenant("25%"));
  ASSERT_EQ(quarter.exit_status, 0) << quarter.describe();
  EXPECT_EQ(quarter.report.number("total"), kGiB);
  EXPECT_EQ(quarter.report.number("device_total"), kGiB) << "cuDeviceTotalMem too";

  Environment hami = with(tenant(""), "CUDA_DEVICE_MEMORY_LIMIT", "512m");
  WorkloadRun aliased = run({"--info"}, hami);
  ASSERT_EQ(aliased.exit_status, 0) << aliased.describe();
  EXPECT_EQ(aliased.report.number("total"), 512 * kMiB);
}

TEST_F(MemoryCap, AnUnreadableLimitRefusesCudaWithOneLine) {
  WorkloadRun sut = run({"--info"}, tenant("10Q"));
  EXPECT_EQ(sut.exit_status, 1) << sut.describe();
  EXPECT_NE(sut.err.find("gpulimit: GPULIMIT_MEM=10Q"), std::string::npos) << sut.describe();
  EXPECT_EQ(std::count(sut.err.begin(), sut.err.end(), '\n'), 2)
      << "gpulimit's line, then the workload's own report of cuInit failing\n"
      << sut.describe();
}

TEST_F(MemoryCap, EightProcessesOfOneTenantRacingNeverExceedTheCap) {
  // Eight processes of one tenant race for 1G each under a 1G cap, in 16M
  // chunks: together they hold exactly the cap, never more.
  const std::vector<std::string> args = {"--path",  "linear", "--target", "1G",
                                         "--chunk", "16M",    "--hold",   "60"};
  std::vector<std::unique_ptr<WorkloadProcess>> racers;
  for (int i = 0; i < 8; ++i)
    racers.push_back(std::make_unique<WorkloadProcess>(kAllocator, args, tenant("1G")));
  for (auto& racer : racers)
    ASSERT_TRUE(racer->wait_for_output("event=holding", 60s));
  uint64_t held = 0;
  std::string all;
  for (auto& racer : racers) {
    racer->kill_now();
    WorkloadRun run = racer->wait(10s);
    held += Report::parse(first_line(run.out)).number("bytes");
    all += run.describe();
  }
  EXPECT_EQ(held, kGiB) << all;
}

TEST_F(MemoryCap, AKilledProcessGivesItsShareBack) {
  WorkloadProcess holder(
      kAllocator, {"--path", "linear", "--target", "768M", "--chunk", "256M", "--hold", "60"},
      tenant("1G"));
  ASSERT_TRUE(holder.wait_for_output("event=holding", 30s));
  WorkloadRun squeezed =
      run({"--path", "linear", "--target", "1G", "--chunk", "256M"}, tenant("1G"));
  ASSERT_EQ(squeezed.exit_status, 0) << squeezed.describe();
  EXPECT_EQ(squeezed.report.number("bytes"), 256 * kMiB) << "the holder has 768M of the 1G";
  holder.kill_now();  // SIGKILL: no chance to clean up
  holder.wait(10s);
  WorkloadRun after = run({"--path", "linear", "--target", "1G", "--chunk", "256M"}, tenant("1G"));
  ASSERT_EQ(after.exit_status, 0) << after.describe();
  EXPECT_EQ(after.report.number("bytes"), kGiB) << after.describe();
}

TEST_F(MemoryCap, OtherTenantsHaveTheirOwnCaps) {
  WorkloadProcess holder(kAllocator,
                         {"--path", "linear", "--target", "1G", "--chunk", "256M", "--hold", "60"},
                         tenant("1G", "first"));
  ASSERT_TRUE(holder.wait_for_output("event=holding", 30s));
  WorkloadRun other =
      run({"--path", "linear", "--target", "1G", "--chunk", "256M"}, tenant("1G", "second"));
  ASSERT_EQ(other.exit_status, 0) << other.describe();
  EXPECT_EQ(other.report.number("bytes"), kGiB);
}

TEST_F(MemoryCap, DeviceIndicesFollowCudaVisibleDevices) {
  // Two devices, seen in reverse order: the job's device 0 is the machine's
  // device 1, and its cap follows the job's numbering.
  Environment env = with(tenant(""), "FAKECUDA_DEVICES", "2");
  env = with(env, "CUDA_VISIBLE_DEVICES", "1,0");
  env = with(env, "GPULIMIT_DEVICE_MEM", "0=1G");
  WorkloadRun capped = run({"--info", "--device", "0"}, env);
  WorkloadRun free_device = run({"--info", "--device", "1"}, env);
  ASSERT_EQ(capped.exit_status, 0) << capped.describe();
  ASSERT_EQ(free_device.exit_status, 0) << free_device.describe();
  EXPECT_EQ(capped.report.number("total"), kGiB);
  EXPECT_EQ(free_device.report.number("total"), 4 * kGiB);
}

}  // namespace
}  // namespace integration
