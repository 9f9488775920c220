// gpulimitd's watcher end to end: the BPF programs report GPU nodes opened
// without gpulimit and tenant exits, and the driver cross-check finds a
// process that allocates on the simulated GPU without the library.
//
// The BPF tests need root, BTF and tracefs (mounted here if it is not);
// where BPF cannot run they are skipped with the reason. /dev/nvidia0 does
// not exist on the test machines: the open fails, and the attempt is what
// the kernel reports.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "forked_process.h"
#include "gpulimit/shm/ledger_inspection.h"
#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "simulated_machine.h"
#include "test_client.h"

namespace server_test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using json = nlohmann::json;
namespace shm = gpulimit::shm;

// The goal is 100 ms; the bound is what a loaded 2-core machine keeps.
constexpr milliseconds kReportDeadline{2'000};
constexpr uint64_t kMiB = uint64_t{1} << 20;

bool exists(const char* path) {
  struct stat info {};
  return ::stat(path, &info) == 0;
}

// Why the BPF watcher cannot run here, or "".
std::string bpf_unavailable() {
  if (!GPULIMIT_BPF_BUILT) return "gpulimitd was built without the BPF watcher";
  if (::geteuid() != 0) return "not root: loading BPF programs needs it";
  if (!exists("/sys/kernel/btf/vmlinux")) return "the kernel has no BTF";
  if (!exists("/sys/kernel/tracing/events/syscalls") &&
      ::mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0)
    return std::string("tracefs is not mounted and cannot be: ") + std::strerror(errno);
  return "";
}

// Opens each node (absent or not) and closes what opened.
void open_nodes(std::initializer_list<const char*> paths) {
  for (const char* path : paths) {
    const int fd = ::open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
  }
}

std::optional<json> status_of(const ServerProcess& server) {
  TestClient client(server.socket());
  return client.status();
}

// The "unmanaged" entry of `pid`, once status shows it; nullopt at the deadline.
std::optional<json> wait_for_unmanaged(const ServerProcess& server, pid_t pid,
                                       milliseconds deadline = kReportDeadline) {
  const auto until = Clock::now() + deadline;
  do {
    if (const std::optional<json> status = status_of(server))
      for (const json& entry : status->at("unmanaged"))
        if (entry.at("pid") == pid) return entry;
    std::this_thread::sleep_for(milliseconds(5));
  } while (Clock::now() < until);
  return std::nullopt;
}

bool lists_tenant(const json& status, const std::string& id) {
  for (const json& tenant : status.at("tenants"))
    if (tenant.at("tenant") == id) return true;
  return false;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t count = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++count;
  return count;
}

bool still_running(ForkedProcess& process) {
  return process.wait_for_exit(milliseconds(50)) == -1;
}

// A forked process that opens GPU nodes without gpulimit, says "opened",
// and waits to be told to end.
std::unique_ptr<ForkedProcess> offender() {
  return std::make_unique<ForkedProcess>([](ParentLine& parent) {
    open_nodes({"/dev/nvidiactl", "/dev/nvidia0"});
    parent.say("opened");
    parent.hear();
    return 0;
  });
}

class BpfWatcher : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = bpf_unavailable(); !why.empty()) GTEST_SKIP() << why;
  }

  // Starts gpulimitd with the watcher on; skips where the kernel refuses BPF.
  std::unique_ptr<ServerProcess> start_server(std::vector<std::string> options) {
    options.insert(options.end(), {"--watch=on", "--cross-check-ms", "0"});
    auto server = std::make_unique<ServerProcess>(dir_.path(), options);
    if (!server->wait_until_serving()) {
      const std::string log = server->log();
      if (log.find("Operation not permitted") != std::string::npos) {
        refused_ = "the kernel does not permit BPF here: " + log;
        return nullptr;
      }
      ADD_FAILURE() << "gpulimitd --watch=on did not start:\n" << log;
      return nullptr;
    }
    return server;
  }

  gpulimit::testing::TemporaryDirectory dir_;
  std::string refused_;
};

#define START_OR_SKIP(server, ...)                            \
  auto server = start_server(__VA_ARGS__);                    \
  if (!server && !refused_.empty()) GTEST_SKIP() << refused_; \
  ASSERT_TRUE(server)

TEST_F(BpfWatcher, ReportsAProcessThatOpensAGpuNodeWithoutGpulimit) {
  START_OR_SKIP(server, {});

  const auto started = Clock::now();
  auto sut = offender();
  ASSERT_NE(sut->expect("opened"), "");
  const std::optional<json> entry = wait_for_unmanaged(*server, sut->pid());

  ASSERT_TRUE(entry) << server->log();
  std::printf("reported within %lld ms of its start\n",
              static_cast<long long>(
                  std::chrono::duration_cast<milliseconds>(Clock::now() - started).count()));
  EXPECT_EQ(entry->at("uid"), ::getuid());
  EXPECT_EQ(entry->at("device"), "/dev/nvidiactl") << "its first open";
  EXPECT_FALSE(entry->at("command").get<std::string>().empty());
  EXPECT_FALSE(entry->at("user").get<std::string>().empty());
  EXPECT_EQ(occurrences(server->log(), "unmanaged GPU process pid " + std::to_string(sut->pid())),
            1u)
      << "two opens, logged once:\n"
      << server->log();
}

TEST_F(BpfWatcher, DoesNotReportATenantsOwnOpens) {
  START_OR_SKIP(server, {});
  const std::string socket = server->socket();
  ForkedProcess tenant([socket](ParentLine& parent) {
    TestClient client(socket);
    if (!client.hello()) return 2;
    open_nodes({"/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm"});
    parent.say("opened");
    parent.hear();
    return 0;
  });
  ASSERT_NE(tenant.expect("opened"), "");

  // Opened after the tenant's: once it is reported, the tenant's opens
  // (had they been sent) were handled before it.
  auto control = offender();
  ASSERT_NE(control->expect("opened"), "");
  ASSERT_TRUE(wait_for_unmanaged(*server, control->pid())) << server->log();

  const std::optional<json> status = status_of(*server);
  ASSERT_TRUE(status);
  for (const json& entry : status->at("unmanaged"))
    EXPECT_NE(entry.at("pid"), tenant.pid());
  EXPECT_EQ(server->log().find("unmanaged GPU process pid " + std::to_string(tenant.pid())),
            std::string::npos)
      << server->log();
}

TEST_F(BpfWatcher, KillTakesTheOffenderAndNothingElse) {
  START_OR_SKIP(server, {"--unmanaged=kill"});
  const std::string socket = server->socket();
  ForkedProcess bystander([](ParentLine& parent) {
    parent.say("ready");
    parent.hear();
    return 0;
  });
  ForkedProcess tenant([socket](ParentLine& parent) {
    TestClient client(socket);
    if (!client.hello()) return 2;
    open_nodes({"/dev/nvidia0"});
    parent.say("opened");
    parent.hear();
    return 0;
  });
  ASSERT_NE(bystander.expect("ready"), "");
  ASSERT_NE(tenant.expect("opened"), "");

  auto sut = offender();

  EXPECT_EQ(sut->wait_for_exit(kReportDeadline), 128 + SIGKILL) << server->log();
  EXPECT_TRUE(still_running(bystander));
  EXPECT_TRUE(still_running(tenant));
  EXPECT_TRUE(status_of(*server)) << "the server lives on";
}

TEST_F(BpfWatcher, ThePolicyFileDecidesOverTheServerWideDefault) {
  // Arrange: --unmanaged says warn, the policy says kill for this user.
  const std::string policy = dir_.path() + "/policy.toml";
  {
    std::ofstream file(policy);
    file << "[users." << getpwuid(geteuid())->pw_name << "]\nunmanaged = \"kill\"\n";
  }
  START_OR_SKIP(server, {"--unmanaged=warn", "--policy", policy});

  // Act
  auto sut = offender();

  // Assert
  EXPECT_EQ(sut->wait_for_exit(kReportDeadline), 128 + SIGKILL) << server->log();
  EXPECT_TRUE(status_of(*server)) << "the server lives on";
}

TEST_F(BpfWatcher, ReclaimsATenantKilledHoldingTheTokenThroughItsExitEvent) {
  // No pidfd watch, and the killed process's connection is kept open by a
  // child of its: nothing but the exit event can tell the server.
  START_OR_SKIP(server, {"--pidfd-exits", "false"});
  const std::string socket = server->socket();
  const std::string dir = dir_.path();
  ForkedProcess holder([socket, dir](ParentLine& parent) {
    TestClient client(socket);
    HelloOptions options;
    options.tenant = "holder";
    options.ledger_dir = dir;
    if (!client.hello(options)) return 2;
    const pid_t keeper = fork();
    if (keeper == 0) {
      for (;;)
        pause();
    }
    // Opened after the fork, so that the keeper shares none of its locks.
    std::string error;
    auto ledger = shm::TenantLedger::open(dir, "holder", error);
    if (!ledger) return 3;
    const int device = ledger->device(kGpu0.data(), 1024 * kMiB);
    if (device < 0 || !ledger->reserve(device, 300 * kMiB)) return 4;
    if (!client.want(client.device()) || !client.wait_until_held(client.device())) return 5;
    parent.say("held " + std::to_string(keeper));
    for (;;)
      pause();
  });
  const std::string held = holder.expect("held ");
  ASSERT_NE(held, "");
  const pid_t keeper = std::stoi(held.substr(5));
  struct KillKeeper {
    pid_t pid;
    ~KillKeeper() { ::kill(pid, SIGKILL); }
  } keeper_guard{keeper};
  TestClient waiter(socket);
  HelloOptions options;
  options.tenant = "waiter";
  ASSERT_TRUE(waiter.hello(options));
  ASSERT_TRUE(waiter.want(waiter.device()));

  holder.kill_now();

  bool gone = false;
  for (const auto until = Clock::now() + kReportDeadline; !gone && Clock::now() < until;) {
    const std::optional<json> status = status_of(*server);
    gone = status && !lists_tenant(*status, "holder");
    if (!gone) std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_TRUE(gone) << server->log();
  EXPECT_TRUE(waiter.wait_until_held(waiter.device(), kReportDeadline));
  EXPECT_NE(server->log().find("pid " + std::to_string(holder.pid()) + " (uid " +
                               std::to_string(::getuid()) +
                               ", tenant holder) exited (reported by the BPF exit event)"),
            std::string::npos)
      << server->log();
  // Its memory: recounted once the kernel has it reaped-ready.
  uint64_t used = 1;
  for (const auto until = Clock::now() + kReportDeadline; used != 0 && Clock::now() < until;) {
    std::vector<shm::LedgerDeviceUsage> usage;
    std::string error;
    if (shm::read_ledger_usage(shm::TenantLedger::path_for(dir, ::getuid(), "holder"), ::getuid(),
                               usage, error) &&
        usage.size() == 1)
      used = usage[0].used;
    if (used != 0) std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(used, 0u) << server->log();
}

TEST(DriverCrossCheck, CatchesAProcessAllocatingOnTheSimulatedGpuWithoutTheLibrary) {
  struct stat pid_namespace {};
  if (::stat("/proc/self/ns/pid", &pid_namespace) != 0 || pid_namespace.st_ino != 0xEFFFFFFC)
    GTEST_SKIP() << "not in the initial pid namespace: NVML's pids are not the server's";
  integration::SimulatedMachine machine("4G");
  // The server's NVML is the simulator's, reading this machine's state.
  for (const auto& [name, value] : machine.environment())
    ::setenv(name.c_str(), value.c_str(), 1);
  gpulimit::testing::TemporaryDirectory dir;
  ServerProcess server(dir.path(), {"--watch=off", "--cross-check-ms", "100"});
  ASSERT_TRUE(server.wait_until_serving()) << server.log();

  integration::WorkloadProcess rogue(integration::kAllocator,
                                     {"--target", "512M", "--chunk", "256M", "--hold", "60"},
                                     machine.environment());
  ASSERT_TRUE(rogue.wait_for_output("event=holding", milliseconds(30'000)));
  const std::optional<json> entry = wait_for_unmanaged(server, rogue.pid(), milliseconds(5'000));

  ASSERT_TRUE(entry) << server.log();
  EXPECT_TRUE(entry->at("device").get<std::string>().starts_with("GPU-")) << *entry;
  EXPECT_EQ(entry->at("uid"), ::getuid());
  EXPECT_NE(server.log().find("unmanaged GPU process pid " + std::to_string(rogue.pid())),
            std::string::npos)
      << server.log();
}

}  // namespace
}  // namespace server_test
