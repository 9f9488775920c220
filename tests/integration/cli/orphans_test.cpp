// Orphans end to end: a real gpulimitd, jobs started by gpulimit on the
// simulated GPU whose main process (a shell) exits while a child of it still
// holds GPU memory. The server shows the orphan (status, top's JSON), leaves
// it running under --orphans warn, and under --orphans kill SIGKILLs it after
// the grace, its memory back on the device as NVML (without the preload)
// counts it. A job whose main process still runs is no orphan, and a job
// that names a false leader makes only its own tenant an orphan.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/testing/server_listening.h"
#include "job_under_server.h"
#include "simulated_machine.h"
#include "workload_process.h"

namespace integration {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kServer = GPULIMITD_PATH;
const std::string kCli = GPULIMIT_CLI_PATH;

// The orphaned children are reparented to this process (a subreaper), so
// that it can tell how each one ended.
class Orphans : public testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }

  void TearDown() override {
    for (const pid_t pid : children_) ::kill(pid, SIGKILL);
    for (const pid_t pid : children_) ::waitpid(pid, nullptr, 0);
    if (server_) {
      ::kill(server_->pid(), SIGTERM);
      server_->wait(30s);
    }
  }

  std::string socket_path() const { return dir_.path() + "/gpulimitd.sock"; }

  void start_server(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"--foreground", "--socket", socket_path(), "--idle-exit-s",
                                     "600"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = std::make_unique<WorkloadProcess>(kServer, args, machine_.environment());
    ASSERT_TRUE(server_->started());
    std::string error;
    ASSERT_TRUE(gpulimit::testing::wait_until_listening(socket_path(), 20s, error))
        << "gpulimitd never listened: " << error;
  }

  Environment job_environment(const std::string& tenant) const {
    return job_under_server(machine_, socket_path(), ledgers_.path(), tenant);
  }

  // `gpulimit --mem 1G -- sh -c SCRIPT`, where SCRIPT starts an allocator
  // holding `size` for 60 s in the background, writes its pid to a file and
  // then runs `then` (the shell, the job's main process, exits after it).
  // Returns the allocator's pid once it holds the memory.
  // `allocator_prefix` goes before the allocator's command (assignments).
  pid_t start_job(const std::string& tenant, const std::string& size, const std::string& then,
                  const std::string& allocator_prefix = "") {
    const std::string pid_file = dir_.path() + "/" + tenant + ".pid";
    const std::string held_file = dir_.path() + "/" + tenant + ".held";
    const std::string script = allocator_prefix + "\"" + kAllocator + "\" --target " + size +
                               " --chunk " + size +
                               " --hold 60 > \"" + held_file + "\" & echo $! > \"" + pid_file +
                               "\"; " + then;
    const Environment env = job_environment(tenant);
    jobs_.push_back(std::make_unique<WorkloadProcess>(
        kCli, std::vector<std::string>{"--mem", "1G", "--", "/bin/sh", "-c", script}, env));
    EXPECT_TRUE(jobs_.back()->started());
    const Clock::time_point deadline = Clock::now() + 30s;
    while (Clock::now() < deadline) {
      if (read_file(held_file).find("event=holding") != std::string::npos) {
        const pid_t pid = static_cast<pid_t>(std::stol(read_file(pid_file)));
        children_.push_back(pid);
        return pid;
      }
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the job's allocator never held its memory: " << read_file(held_file);
    return -1;
  }

  nlohmann::json status() const {
    const WorkloadRun run = run_workload(kCli, {"status", "--json"}, job_environment("status"));
    EXPECT_EQ(run.exit_status, 0) << run.describe();
    return nlohmann::json::parse(run.out, nullptr, false);
  }

  std::optional<nlohmann::json> tenant_status(const std::string& tenant) const {
    const nlohmann::json report = status();
    if (!report.is_object()) return std::nullopt;
    for (const nlohmann::json& entry : report["tenants"])
      if (entry["tenant"] == tenant) return entry;
    return std::nullopt;
  }

  // Waits until the tenant's status satisfies `holds`.
  template <typename Predicate>
  std::optional<nlohmann::json> wait_for_tenant(const std::string& tenant, Predicate holds,
                                                std::chrono::milliseconds timeout) const {
    const Clock::time_point deadline = Clock::now() + timeout;
    std::optional<nlohmann::json> last;
    while (Clock::now() < deadline) {
      last = tenant_status(tenant);
      if (last && holds(*last)) return last;
      std::this_thread::sleep_for(50ms);
    }
    return std::nullopt;
  }

  // How process `pid` ended, waiting at most `timeout`; nullopt while it
  // runs. Its wait status when it was reparented here (its shell is gone),
  // else kEndedElsewhere once it is gone or a zombie of its shell.
  static constexpr int kEndedElsewhere = -1;
  std::optional<int> ended(pid_t pid, std::chrono::milliseconds timeout) {
    const Clock::time_point deadline = Clock::now() + timeout;
    while (true) {
      int status = 0;
      const pid_t waited = ::waitpid(pid, &status, WNOHANG);
      if (waited == pid) {
        std::erase(children_, pid);
        return status;
      }
      if (waited < 0 && !running(pid)) return kEndedElsewhere;
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(20ms);
    }
  }

  static bool running(pid_t pid) {
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    const std::size_t close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
  }

  // What the device holds, from NVML without the preload.
  uint64_t device_used() const {
    const WorkloadRun run = run_workload(kDeviceViews, {"--nvml-only"}, machine_.environment());
    EXPECT_EQ(run.exit_status, 0) << run.describe();
    const std::size_t at = run.out.find("nvml0_used=");
    if (at == std::string::npos) return 0;
    return std::stoull(run.out.substr(at + 11));
  }

  SimulatedMachine machine_{"4G"};
  TemporaryDirectory dir_;
  TemporaryDirectory ledgers_;
  std::unique_ptr<WorkloadProcess> server_;
  std::vector<std::unique_ptr<WorkloadProcess>> jobs_;
  std::vector<pid_t> children_;
};

bool is_orphan(const nlohmann::json& tenant) {
  return tenant.contains("orphaned_s") && !tenant["orphaned_s"].is_null();
}

TEST_F(Orphans, AJobWhoseMainProcessRunsIsNoOrphan) {
  start_server({"--orphans", "kill", "--orphan-grace", "0"});
  const pid_t child = start_job("led", "256M", "sleep 60");
  ASSERT_GT(child, 0);

  const std::optional<nlohmann::json> tenant =
      wait_for_tenant("led", [](const nlohmann::json&) { return true; }, 10s);
  ASSERT_TRUE(tenant);
  EXPECT_TRUE((*tenant)["leader"].is_number()) << tenant->dump();
  EXPECT_EQ((*tenant)["leader"], jobs_.back()->pid()) << "gpulimit execs the command as itself";
  EXPECT_FALSE(is_orphan(*tenant)) << tenant->dump();
  EXPECT_FALSE(ended(child, 1500ms)) << "a job whose main process lives is never killed";
}

TEST_F(Orphans, TheMainProcessExitingMakesItsRunningJobAnOrphan) {
  start_server({"--orphans", "warn"});
  const pid_t child = start_job("late", "256M", "sleep 60");
  ASSERT_GT(child, 0);
  ASSERT_TRUE(wait_for_tenant("late", [](const nlohmann::json&) { return true; }, 10s));
  ASSERT_FALSE(is_orphan(*tenant_status("late")));

  jobs_.back()->kill_now();  // the shell, the job's main process; not its child

  const std::optional<nlohmann::json> tenant = wait_for_tenant("late", is_orphan, 10s);
  ASSERT_TRUE(tenant) << "the server never saw the main process go";
  EXPECT_EQ((*tenant)["pids"], nlohmann::json::array({child}));
  EXPECT_LT((*tenant)["orphaned_s"].get<double>(), 10.0);
}

TEST_F(Orphans, UnderWarnAnOrphanIsShownAndLeftRunning) {
  start_server({"--orphans", "warn", "--orphan-grace", "0"});
  const pid_t child = start_job("left-behind", "256M", "exit 0");
  ASSERT_GT(child, 0);

  const std::optional<nlohmann::json> tenant = wait_for_tenant("left-behind", is_orphan, 10s);
  ASSERT_TRUE(tenant) << "the job's shell exited while its allocator holds memory";
  EXPECT_EQ((*tenant)["pids"], nlohmann::json::array({child}));
  EXPECT_TRUE((*tenant)["orphan_kill_in_s"].is_null()) << tenant->dump();
  EXPECT_FALSE(ended(child, 1500ms)) << "warn never kills";

  // The table says so too.
  const WorkloadRun table = run_workload(kCli, {"status"}, job_environment("status"));
  EXPECT_NE(table.out.find("ORPHAN"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("never"), std::string::npos) << table.out;
}

TEST_F(Orphans, UnderKillAnOrphanIsKilledAfterItsGraceAndItsMemoryComesBack) {
  start_server({"--orphans", "kill", "--orphan-grace", "1"});
  const uint64_t before = device_used();
  const pid_t child = start_job("cleaned-up", "512M", "exit 0");
  ASSERT_GT(child, 0);
  EXPECT_GE(device_used(), before + (512ull << 20)) << "the orphan holds its memory";

  const std::optional<nlohmann::json> tenant = wait_for_tenant("cleaned-up", is_orphan, 10s);
  ASSERT_TRUE(tenant);
  ASSERT_TRUE((*tenant)["orphan_kill_in_s"].is_number()) << tenant->dump();
  EXPECT_LE((*tenant)["orphan_kill_in_s"].get<double>(), 1.0);

  const std::optional<int> how = ended(child, 20s);
  ASSERT_TRUE(how) << "the orphan still runs after its grace";
  EXPECT_TRUE(WIFSIGNALED(*how) && WTERMSIG(*how) == SIGKILL) << "wait status " << *how;

  // Gone from status, and from the device.
  const Clock::time_point deadline = Clock::now() + 10s;
  while ((tenant_status("cleaned-up") || device_used() > before) && Clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(tenant_status("cleaned-up")) << "the killed orphan's tenant left";
  EXPECT_EQ(device_used(), before);
}

TEST_F(Orphans, AFalseLeaderMakesOnlyItsOwnTenantAnOrphan) {
  // A grace long enough for the liar's allocator to say it holds its memory.
  start_server({"--orphans", "kill", "--orphan-grace", "1"});
  const pid_t honest = start_job("honest", "256M", "sleep 60");
  ASSERT_GT(honest, 0);
  // The other job's allocator says its leader is the honest job's
  // allocator, with a made-up start time: its own tenant is taken for an
  // orphan and killed, the honest job is untouched. Its shell lives on, and
  // writes down how the allocator ended.
  const std::string status_file = dir_.path() + "/liar.status";
  const pid_t liar =
      start_job("liar", "256M", "wait $!; echo $? > \"" + status_file + "\"; sleep 60",
                "GPULIMIT_JOB_LEADER=" + std::to_string(honest) + ":1 ");
  ASSERT_GT(liar, 0);

  ASSERT_TRUE(ended(liar, 20s)) << "a job that names a leader that is not running is an orphan";
  const Clock::time_point deadline = Clock::now() + 5s;
  while (read_file(status_file).empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(read_file(status_file), std::to_string(128 + SIGKILL) + "\n");
  EXPECT_FALSE(ended(honest, 500ms)) << "the process named as leader is never signalled";
  const std::optional<nlohmann::json> tenant = tenant_status("honest");
  ASSERT_TRUE(tenant);
  EXPECT_FALSE(is_orphan(*tenant)) << tenant->dump();
}

}  // namespace
}  // namespace integration
