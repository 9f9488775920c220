// The processes of one tenant share its memory cap however they come to be:
// forked (before or after CUDA was taken), exec'd by a shell under the
// gpulimit command, as threads of one process, or killed midway. Every
// process runs with libgpulimit.so preloaded on the simulated driver.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "simulated_machine.h"
#include "test_parameters.h"
#include "workload_process.h"

namespace integration {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kNotInitialized = 3;  // CUDA_ERROR_NOT_INITIALIZED
const std::string kGpulimit = GPULIMIT_CLI_PATH;

// The report line of `out` that contains `marker`; fails the test if none.
Report line_with(const std::string& out, const std::string& marker) {
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(start, end - start);
    if (line.find(marker) != std::string::npos) return Report::parse(line);
    start = end + 1;
  }
  ADD_FAILURE() << "no line with " << marker << " in:\n" << out;
  return Report();
}

// Whether `pid` is a process that has not ended (a zombie has ended).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, name, state;
  // The name is in parentheses without spaces for the programs run here.
  return static_cast<bool>(stat >> pid_field >> name >> state) && state != "Z" && state != "X";
}

// Kills a process this test did not start (a grandchild) when the test ends,
// however it ends.
class KillAtEnd {
 public:
  explicit KillAtEnd(pid_t pid) : pid_(pid) {}
  KillAtEnd(const KillAtEnd&) = delete;
  KillAtEnd& operator=(const KillAtEnd&) = delete;
  ~KillAtEnd() {
    if (pid_ > 0) kill(pid_, SIGKILL);
  }

 private:
  pid_t pid_;
};

class TenantProcesses : public testing::Test {
 protected:
  // A process of tenant `id` capped at `mem` (no cap when empty).
  Environment tenant(const std::string& mem, const std::string& id = "family") const {
    return machine_.tenant_environment(ledgers_.path(), mem, id);
  }
  // What the gpulimit command needs to start a job on this machine.
  Environment command_environment() const {
    Environment env = machine_.environment();
    env = with(env, "GPULIMIT_LIBRARY", kLibrary);
    env = with(env, "ASAN_OPTIONS", "verify_asan_link_order=0");
    return with(env, "GPULIMIT_LEDGER_DIR", ledgers_.path());
  }
  static WorkloadRun run(const std::string& program, const std::vector<std::string>& args,
                         const Environment& env) {
    return run_workload(program, args, env, 60s);
  }
  // What one more process of the tenant can take: an allocator asking for
  // the whole 1G cap in 16M chunks.
  uint64_t obtainable() {
    const WorkloadRun probe =
        run(kAllocator, {"--path", "linear", "--target", "1G", "--chunk", "16M"}, tenant("1G"));
    EXPECT_EQ(probe.exit_status, 0) << probe.describe();
    return probe.report.number("bytes");
  }

  SimulatedMachine machine_{"4G"};
  TemporaryDirectory ledgers_;
};

// --- fork ---------------------------------------------------------------

class ForkedIdleChild : public TenantProcesses, public testing::WithParamInterface<bool> {};

TEST_P(ForkedIdleChild, ChangesNothingByLivingOrEnding) {
  std::vector<std::string> args = {"idle-child", "--hold", "512M"};
  if (GetParam()) args.push_back("--quick-exit");
  const WorkloadRun sut = run(kForkingTenant, args, tenant("1G"));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  EXPECT_EQ(sut.report.number("child_status"), 0u);
  EXPECT_EQ(sut.report.number("held"), 512 * kMiB);
  EXPECT_EQ(sut.report.number("free_after_child"), 512 * kMiB)
      << "the child's exit gave nothing of the parent's back\n"
      << sut.describe();
  EXPECT_EQ(sut.report.number("more"), 512 * kMiB) << sut.describe();
  EXPECT_EQ(sut.err, "");
}

// exit() runs the atexit handlers and static destructors the child
// inherited; _exit() runs none.
INSTANTIATE_TEST_SUITE_P(ExitAndQuickExit, ForkedIdleChild, testing::Bool(),
                         [](const auto& test) { return test.param ? "QuickExit" : "Exit"; });

TEST_F(TenantProcesses, AForkedChildOutlivingItsKilledParentKeepsNothingOfItsShare) {
  WorkloadProcess parent(kForkingTenant, {"lingering-child", "--hold", "768M"}, tenant("1G"));
  ASSERT_TRUE(parent.wait_for_output("event=holding", 30s));
  parent.kill_now();  // SIGKILL: it dies holding 768M, its child lives on
  const WorkloadRun killed = parent.wait(10s);
  EXPECT_EQ(killed.exit_status, 128 + SIGKILL) << killed.describe();
  const Report holding = line_with(killed.out, "event=holding");
  EXPECT_EQ(holding.number("bytes"), 768 * kMiB);
  const auto child = static_cast<pid_t>(holding.number("child_pid"));
  ASSERT_GT(child, 0);
  KillAtEnd child_guard(child);
  ASSERT_TRUE(running(child)) << "the child must outlive its parent for this test";

  EXPECT_EQ(obtainable(), kGiB)
      << "the parent died with 768M; its child, which never took CUDA, holds none of it";
}

TEST_F(TenantProcesses, AChildForkedAfterCuInitGetsTheDriversRefusalAndTakesNothing) {
  const WorkloadRun sut = run(kForkingTenant, {"cuda-child", "--hold", "256M"}, tenant("1G"));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  // The driver cannot be used in a child forked after cuInit; the library
  // passes its answer on rather than attaching the child.
  const Report child = line_with(sut.out, "role=child");
  EXPECT_EQ(child.number("init"), kNotInitialized);
  EXPECT_EQ(child.number("alloc"), kNotInitialized);
  EXPECT_EQ(child.number("mem_get_info"), kNotInitialized);
  EXPECT_EQ(sut.report.number("child_status"), 0u);
  EXPECT_EQ(sut.report.number("free_after_child"), 768 * kMiB) << sut.describe();
  EXPECT_EQ(sut.report.number("more"), 768 * kMiB) << sut.describe();
}

TEST_F(TenantProcesses, AChildForkedBeforeCuInitSharesTheCapAndGivesBackAtExit) {
  // Parent and child race for the 1G cap in 16M chunks, holding what they get.
  const WorkloadRun sut = run(kForkingTenant, {"sibling", "--chunk", "16M"}, tenant("1G"));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  const uint64_t parent = report.number("held");
  const uint64_t child = report.number("child_bytes");
  EXPECT_EQ(parent + child, kGiB) << "together exactly the cap\n" << sut.describe();
  EXPECT_EQ(report.number("free_while_both"), 0u);
  EXPECT_EQ(report.number("child_status"), 0u);
  EXPECT_EQ(report.number("free_after_child"), kGiB - parent)
      << "the child exited holding its bytes; they came back\n"
      << sut.describe();
  EXPECT_EQ(report.number("more"), child) << sut.describe();
}

class ForkedChildThatExecs : public TenantProcesses, public testing::WithParamInterface<bool> {};

TEST_P(ForkedChildThatExecs, IsANewProcessOfTheSameTenant) {
  // Without GPULIMIT_TENANT the library names the tenant at cuInit and puts
  // the name in the environment, for the children to inherit.
  const bool named = GetParam();
  const Environment env = named ? tenant("1G") : tenant("1G", "");
  const WorkloadRun sut = run(kForkingTenant,
                              {"exec-child", "--hold", "512M", "--", kAllocator, "--path", "linear",
                               "--target", "1G", "--chunk", "64M"},
                              env);
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report child = line_with(sut.out, "workload=allocator");
  EXPECT_EQ(child.number("total"), kGiB) << "the exec'd child has the cap";
  EXPECT_EQ(child.number("bytes"), 512 * kMiB) << "and shares it with its parent\n"
                                               << sut.describe();
  EXPECT_EQ(child.text("error"), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(sut.report.number("child_status"), 0u);
  EXPECT_EQ(sut.report.number("free_after_child"), 512 * kMiB);
  EXPECT_EQ(sut.report.number("more"), 512 * kMiB) << sut.describe();
}

INSTANTIATE_TEST_SUITE_P(NamedAndUnnamedTenant, ForkedChildThatExecs, testing::Bool(),
                         [](const auto& test) { return test.param ? "Named" : "Unnamed"; });

// --- exec'd grandchildren of a gpulimit job --------------------------------

TEST_F(TenantProcesses, AGpulimitJobsGrandchildrenShareItsCap) {
  // gpulimit execs the shell; the shell starts two allocators. The first
  // holds 768M and says so through a FIFO; only then does the second ask for
  // the whole cap.
  const std::string fifo = ledgers_.path() + "/holding";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string script =
      R"("$0" --target 768M --chunk 256M --hold 60 > "$1" &
read line < "$1"
echo "$line"
"$0" --target 1G --chunk 256M
kill $!
wait)";
  WorkloadProcess job(kGpulimit, {"--mem", "1G", "--", "/bin/sh", "-c", script, kAllocator, fifo},
                      command_environment());
  const WorkloadRun sut = job.wait(60s);
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report first = line_with(sut.out, "event=holding");
  EXPECT_EQ(first.number("bytes"), 768 * kMiB) << sut.describe();
  const Report second = sut.report;
  EXPECT_EQ(second.number("total"), kGiB) << "the limit travelled to the grandchild";
  EXPECT_EQ(second.number("bytes"), 256 * kMiB) << "what its sibling left of the cap\n"
                                                << sut.describe();
  EXPECT_EQ(second.text("error"), "CUDA_ERROR_OUT_OF_MEMORY");
}

TEST_F(TenantProcesses, AnotherGpulimitJobIsAnotherTenant) {
  WorkloadProcess first(
      kGpulimit,
      {"--mem", "1G", "--", kAllocator, "--target", "1G", "--chunk", "256M", "--hold", "60"},
      command_environment());
  ASSERT_TRUE(first.wait_for_output("event=holding", 30s));
  const WorkloadRun second =
      run(kGpulimit, {"--mem", "1G", "--", kAllocator, "--target", "1G", "--chunk", "256M"},
          command_environment());
  ASSERT_EQ(second.exit_status, 0) << second.describe();
  EXPECT_EQ(second.report.number("bytes"), kGiB);
}

// --- threads -------------------------------------------------------------

// 32 threads of one process race for a 1G cap in 16M chunks through each
// path's hooks (and through each way of reaching the driver).
class ThirtyTwoThreads : public TenantProcesses,
                         public testing::WithParamInterface<std::pair<std::string, std::string>> {};

TEST_P(ThirtyTwoThreads, RacingForTheLastBytesNeverExceedTheCap) {
  const auto& [path, access] = GetParam();
  const WorkloadRun sut = run(kAllocator,
                              {"--path", path, "--access", access, "--threads", "32", "--target",
                               "2G", "--chunk", "16M", "--retry"},
                              tenant("1G"));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  EXPECT_EQ(report.number("threads"), 32u);
  EXPECT_EQ(report.text("error"), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(report.number("bytes"), kGiB) << "64 chunks of 16M fill the cap exactly\n"
                                          << sut.describe();
  const std::vector<uint64_t> per_thread = report.numbers("thread_bytes");
  EXPECT_EQ(per_thread.size(), 32u);
  EXPECT_EQ(std::accumulate(per_thread.begin(), per_thread.end(), uint64_t{0}), kGiB);
  EXPECT_EQ(report.number("free_after_alloc"), 0u);
  EXPECT_EQ(report.number("free_after_free"), kGiB);
  EXPECT_EQ(report.number("retry_bytes"), kGiB) << "everything came back";
}

INSTANTIATE_TEST_SUITE_P(Paths, ThirtyTwoThreads,
                         testing::Values(std::pair{"linear", "linked"}, std::pair{"pitch", "dlsym"},
                                         std::pair{"managed", "proc"},
                                         std::pair{"async", "proc-v2"}, std::pair{"pool", "linked"},
                                         std::pair{"vmm", "proc-v2"}, std::pair{"array", "dlsym"},
                                         std::pair{"array3d", "proc"}),
                         [](const auto& test) {
                           return test_name(test.param.first + "_" + test.param.second);
                         });

TEST_F(TenantProcesses, EightProcessesOfFourThreadsNeverExceedTheCap) {
  const std::vector<std::string> args = {"--path", "linear",  "--threads", "4",      "--target",
                                         "1G",     "--chunk", "16M",       "--hold", "60"};
  std::vector<std::unique_ptr<WorkloadProcess>> racers;
  for (int i = 0; i < 8; ++i)
    racers.push_back(std::make_unique<WorkloadProcess>(kAllocator, args, tenant("1G")));
  for (auto& racer : racers)
    ASSERT_TRUE(racer->wait_for_output("event=holding", 60s));
  uint64_t held = 0;
  std::string all;
  for (auto& racer : racers) {
    racer->kill_now();
    const WorkloadRun run = racer->wait(10s);
    held += line_with(run.out, "event=holding").number("bytes");
    all += run.describe();
  }
  EXPECT_EQ(held, kGiB) << all;
  EXPECT_EQ(obtainable(), kGiB) << "the killed racers gave everything back";
}

// --- SIGKILL ---------------------------------------------------------------

TEST_F(TenantProcesses, ProcessesKilledWhileAllocatingInALoopLeaveWhatTheLiveOnesHold) {
  WorkloadProcess holder(kAllocator, {"--target", "256M", "--chunk", "256M", "--hold", "60"},
                         tenant("1G"));
  ASSERT_TRUE(holder.wait_for_output("event=holding", 30s));

  // Each round, two processes of four threads allocate up to the cap and
  // free it all, over and over; each is killed at whatever point it reached
  // once it is looping, the second while the first may still be dying.
  const std::vector<std::string> churn = {"--path", "linear",   "--threads", "4",       "--rounds",
                                          "0",      "--target", "1G",        "--chunk", "16M"};
  for (int round = 0; round < 4; ++round) {
    WorkloadProcess first(kAllocator, churn, tenant("1G"));
    WorkloadProcess second(kAllocator, churn, tenant("1G"));
    ASSERT_TRUE(first.wait_for_output("event=looping", 30s)) << first.wait(10s).describe();
    first.kill_now();
    ASSERT_TRUE(second.wait_for_output("event=looping", 30s)) << second.wait(10s).describe();
    second.kill_now();
    EXPECT_EQ(first.wait(10s).exit_status, 128 + SIGKILL);
    EXPECT_EQ(second.wait(10s).exit_status, 128 + SIGKILL);
  }
  EXPECT_EQ(obtainable(), 768 * kMiB) << "the live holder's 256M still count, nothing else";

  holder.kill_now();
  holder.wait(10s);
  EXPECT_EQ(obtainable(), kGiB);
}

// --- CUDA_VISIBLE_DEVICES and NVML --------------------------------------------

// Two devices of different sizes (physical 0: 4G, physical 1: 8G), seen in
// reverse order: the job's device 0 is physical device 1.
class ReorderedDevices : public TenantProcesses {
 protected:
  Environment reordered(Environment env) const {
    env = with(env, "FAKECUDA_DEVICES", "2");
    env = with(env, "FAKECUDA_MEM", "4G,8G");
    return with(env, "CUDA_VISIBLE_DEVICES", "1,0");
  }
};

TEST_F(ReorderedDevices, EachCapLandsOnItsPhysicalDeviceInCudaAndNvml) {
  const Environment env = with(reordered(tenant("")), "GPULIMIT_DEVICE_MEM", "0=1G,1=2G");
  const WorkloadRun sut = run(kDeviceViews, {"--alloc", "0", "256M"}, env);
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& views = sut.report;
  ASSERT_EQ(views.number("cuda_devices"), 2u);
  ASSERT_EQ(views.number("nvml_devices"), 2u);
  ASSERT_EQ(views.text("cuda0_uuid"), views.text("nvml1_uuid"));
  ASSERT_EQ(views.text("cuda1_uuid"), views.text("nvml0_uuid"));

  // The job's device 0, physical 1: capped at 1G, 256M of it in use.
  EXPECT_EQ(views.number("cuda0_total"), kGiB);
  EXPECT_EQ(views.number("cuda0_device_total"), kGiB);
  EXPECT_EQ(views.number("cuda0_free"), 768 * kMiB);
  EXPECT_EQ(views.number("nvml1_total"), kGiB);
  EXPECT_EQ(views.number("nvml1_free"), 768 * kMiB);
  EXPECT_EQ(views.number("nvml1_used"), 256 * kMiB);
  EXPECT_EQ(views.number("nvml1_v2_total"), kGiB);
  EXPECT_EQ(views.number("nvml1_v2_free"), 768 * kMiB);
  // The job's device 1, physical 0: capped at 2G, unused.
  EXPECT_EQ(views.number("cuda1_total"), 2 * kGiB);
  EXPECT_EQ(views.number("cuda1_device_total"), 2 * kGiB);
  EXPECT_EQ(views.number("cuda1_free"), 2 * kGiB);
  EXPECT_EQ(views.number("nvml0_total"), 2 * kGiB);
  EXPECT_EQ(views.number("nvml0_free"), 2 * kGiB);
  EXPECT_EQ(views.number("nvml0_v2_total"), 2 * kGiB);
}

TEST_F(ReorderedDevices, ACapThroughTheCommandLeavesTheOtherPhysicalDeviceWhole) {
  const WorkloadRun sut = run(kGpulimit, {"--device-mem", "1=1G", "--", kDeviceViews},
                              reordered(command_environment()));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& views = sut.report;
  ASSERT_EQ(views.text("cuda1_uuid"), views.text("nvml0_uuid"));
  // The job's device 1 is physical device 0 (4G): capped at 1G.
  EXPECT_EQ(views.number("cuda1_total"), kGiB);
  EXPECT_EQ(views.number("nvml0_total"), kGiB);
  EXPECT_EQ(views.number("nvml0_v2_total"), kGiB);
  // The job's device 0 is physical device 1 (8G): no cap.
  EXPECT_EQ(views.number("cuda0_total"), 8 * kGiB);
  EXPECT_EQ(views.number("nvml1_total"), 8 * kGiB);
}

// A launcher that narrows CUDA_VISIBLE_DEVICES for its workers renumbers
// the GPUs: a cap given by index must stay on the GPU the index named where
// it was given (the job's device 0 here is physical device 1, 8G). The worker
// sees physical 0 as its device 0 and physical 1 as its device 1.
constexpr const char* kWorkerView = "CUDA_VISIBLE_DEVICES=0,1 exec ";

void expect_cap_stayed_on_physical_device_1(const Report& worker, const std::string& describe) {
  EXPECT_EQ(worker.number("cuda0_total"), 4 * kGiB)
      << "the worker's device 0 is physical 0, which has no cap\n"
      << describe;
  EXPECT_EQ(worker.number("cuda1_total"), kGiB)
      << "the worker's device 1 is physical 1, the device capped at 1G\n"
      << describe;
  EXPECT_EQ(worker.number("nvml1_total"), kGiB) << describe;
  EXPECT_EQ(worker.number("nvml0_total"), 4 * kGiB) << describe;
}

TEST_F(ReorderedDevices, AWorkerOfAGpulimitJobThatRenumbersTheDevicesKeepsEachGpusCap) {
  // The launcher itself never takes CUDA: gpulimit binds the index.
  const WorkloadRun sut =
      run(kGpulimit,
          {"--device-mem", "0=1G", "--", "/bin/sh", "-c", std::string(kWorkerView) + kDeviceViews},
          reordered(command_environment()));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  expect_cap_stayed_on_physical_device_1(sut.report, sut.describe());
}

TEST_F(ReorderedDevices, AChildThatRenumbersTheDevicesKeepsEachGpusCap) {
  // No gpulimit command (HAMi's variable): the first process to take CUDA
  // binds the index, and its children inherit the binding.
  const Environment env = with(reordered(tenant("")), "CUDA_DEVICE_MEMORY_LIMIT_0", "1G");
  const WorkloadRun sut =
      run(kForkingTenant,
          {"exec-child", "--", "/bin/sh", "-c", std::string(kWorkerView) + kDeviceViews}, env);
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  expect_cap_stayed_on_physical_device_1(line_with(sut.out, "cuda_devices="), sut.describe());
}

TEST_F(ReorderedDevices, ACapByUuidLandsOnThatGpuWhateverItsIndex) {
  // Physical device 1's UUID, as NVML names it, through the command.
  const WorkloadRun probe = run(kDeviceViews, {}, reordered(machine_.environment()));
  ASSERT_EQ(probe.exit_status, 0) << probe.describe();
  const std::string physical_1 = probe.report.text("nvml1_uuid");
  const WorkloadRun sut = run(kGpulimit,
                              {"--device-mem", physical_1 + "=1G", "--", "/bin/sh", "-c",
                               std::string(kWorkerView) + kDeviceViews},
                              reordered(command_environment()));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  expect_cap_stayed_on_physical_device_1(sut.report, sut.describe());
}

TEST_F(ReorderedDevices, NvmlShowsTheCapsBeforeTheProgramTakesCuda) {
  // A tool that sizes itself from NVML before (or without) cuInit. The
  // job's processes have the caps by UUID from the gpulimit command.
  const WorkloadRun sut =
      run(kGpulimit, {"--mem", "2G", "--device-mem", "0=1G", "--", kDeviceViews, "--nvml-only"},
          reordered(command_environment()));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& views = sut.report;
  EXPECT_EQ(views.number("nvml1_total"), kGiB) << "physical 1 is the job's device 0\n"
                                               << sut.describe();
  EXPECT_EQ(views.number("nvml1_v2_total"), kGiB);
  EXPECT_EQ(views.number("nvml0_total"), 2 * kGiB) << "physical 0 has the cap of every device";
  EXPECT_EQ(views.number("nvml0_free"), 2 * kGiB);
}

TEST_F(ReorderedDevices, NvmlBeforeCudaCountsWhatTheTenantsOtherProcessesHold) {
  // One process of the tenant holds 768M of its 1G; another, before its
  // cuInit, must see 256M free, not the whole cap.
  const Environment env = reordered(tenant("1G"));
  WorkloadProcess holder(kForkingTenant, {"lingering-child", "--hold", "768M"}, env);
  ASSERT_TRUE(holder.wait_for_output("event=holding", 30s));
  const WorkloadRun sut = run(kDeviceViews, {"--nvml-only"}, env);
  holder.kill_now();
  const WorkloadRun held = holder.wait(10s);
  KillAtEnd child_guard(
      static_cast<pid_t>(line_with(held.out, "event=holding").number("child_pid")));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  // The holder's device 0 is physical 1.
  EXPECT_EQ(sut.report.number("nvml1_total"), kGiB) << sut.describe();
  EXPECT_EQ(sut.report.number("nvml1_free"), 256 * kMiB) << sut.describe();
  EXPECT_EQ(sut.report.number("nvml0_free"), kGiB) << sut.describe();
}

TEST_F(ReorderedDevices, NvmlBeforeCudaWithCapsStillByIndexShowsTheLeastOfThem) {
  // HAMi's variables, no gpulimit command: which GPU index 1 names is known
  // only at cuInit, so NVML shows every GPU the least cap meanwhile.
  const Environment env = with(with(reordered(tenant("")), "CUDA_DEVICE_MEMORY_LIMIT", "3G"),
                               "CUDA_DEVICE_MEMORY_LIMIT_1", "1G");
  const WorkloadRun sut = run(kDeviceViews, {"--nvml-only"}, env);
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  EXPECT_EQ(sut.report.number("nvml0_total"), kGiB) << sut.describe();
  EXPECT_EQ(sut.report.number("nvml1_total"), kGiB) << sut.describe();
}

}  // namespace
}  // namespace integration
