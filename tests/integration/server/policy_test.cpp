// The administrator's policy file end to end: a real gpulimitd started with
// --policy, tenants under libgpulimit.so on the simulated GPU (the allocator
// and the spinner), and status read from the server. The policy names the
// test's own uid, which is what the kernel reports for its tenants.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/testing/simulated_machine.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "workload_output.h"
#include "test_client.h"

namespace server_test {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kProgramTimeout{60'000};
constexpr uint64_t kMiB = uint64_t{1} << 20;

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

class Policy : public ::testing::Test {
 protected:
  std::string policy_path() const { return dir_.path() + "/policy.toml"; }
  void write_policy(const std::string& text) const {
    std::ofstream(policy_path() + ".new") << text;
    // Whole or not at all, as an administrator's editor saves it.
    ASSERT_EQ(::rename((policy_path() + ".new").c_str(), policy_path().c_str()), 0);
  }
  // "[users.UID]": this test's own user, as the kernel reports it.
  static std::string my_entry() { return "[users." + std::to_string(::getuid()) + "]\n"; }

  void start_server() {
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--policy", policy_path(), "--quantum-ms", "40"});
    ASSERT_TRUE(server_->wait_until_serving()) << server_->log();
  }

  // A tenant process's environment on this test's simulated GPU, with
  // `limits` (GPULIMIT_*=VALUE) added.
  std::vector<std::string> tenant_environment(const std::string& tenant,
                                              const std::vector<std::string>& limits) const {
    // Contexts take nothing: what a test allocates is all a tenant is charged.
    std::vector<std::string> environment = gpulimit::testing::assignments(
        gpulimit::testing::with(machine_.tenant_environment(dir_.path(), "", tenant),
                                "GPULIMIT_SOCKET", server_->socket()));
    environment.insert(environment.end(), limits.begin(), limits.end());
    return environment;
  }

  // Runs the allocator as tenant `tenant` up to 3 GiB in 64 MiB chunks; its output.
  std::string run_allocator(const std::string& tenant, const std::vector<std::string>& limits) {
    const std::string output = dir_.path() + "/" + tenant + ".out";
    gpulimit::testing::Process allocator = spawn_program(
        {WORKLOAD_ALLOCATOR_PATH, "--path", "linear", "--target", "3G", "--chunk", "64M"},
        tenant_environment(tenant, limits), output);
    EXPECT_EQ(wait_for_program(allocator, kProgramTimeout), 0)
        << read_file(output) << server_->log();
    return read_file(output);
  }

  // The tenant `id` in the server's status, once it is there (null after
  // the timeout).
  nlohmann::json wait_for_tenant(const std::string& id) {
    const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      TestClient client(server_->socket());
      if (const std::optional<nlohmann::json> status = client.status())
        for (const nlohmann::json& tenant : (*status)["tenants"])
          if (tenant["tenant"] == id) return tenant;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return nullptr;
  }

  // Waits until the server's log holds `text` (false after the timeout).
  bool wait_for_log(const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (server_->log().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return false;
  }

  gpulimit::testing::TemporaryDirectory dir_;
  gpulimit::testing::SimulatedMachine machine_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(Policy, AMemoryCapAboveTheMaximumIsLoweredToItAndTheUserToldOnce) {
  write_policy(my_entry() + "max_memory = \"1G\"\n");
  start_server();

  const std::string output = run_allocator("over", {"GPULIMIT_MEM=2G"});

  EXPECT_EQ(value_of(output, "error"), "CUDA_ERROR_OUT_OF_MEMORY") << output;
  EXPECT_EQ(value_of(output, "bytes"), std::to_string(1024 * kMiB)) << output;
  EXPECT_EQ(count_of(output, "gpulimit: the policy lowers --mem 2G to 1G\n"), 1u) << output;
}

TEST_F(Policy, TheNoticeIsPrintedByTheTenantsFirstProcessOnly) {
  write_policy(my_entry() + "max_memory = \"1G\"\n");
  start_server();
  const std::string first_output = dir_.path() + "/first.out";
  gpulimit::testing::Process first =
      spawn_program({WORKLOAD_ALLOCATOR_PATH, "--path", "linear", "--target", "3G", "--chunk",
                     "64M", "--hold", "60"},
                    tenant_environment("shared", {"GPULIMIT_MEM=2G"}), first_output);
  const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
  while (read_file(first_output).find("event=holding") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(20));

  const std::string second = run_allocator("shared", {"GPULIMIT_MEM=2G"});
  first.signal(SIGKILL);
  wait_for_program(first, kProgramTimeout);

  EXPECT_EQ(value_of(read_file(first_output), "bytes"), std::to_string(1024 * kMiB))
      << read_file(first_output);
  EXPECT_EQ(count_of(read_file(first_output), "gpulimit: the policy lowers"), 1u)
      << read_file(first_output);
  // The tenant's cap is the policy's, and the first process holds all of it.
  EXPECT_EQ(value_of(second, "bytes"), "0") << second;
  EXPECT_EQ(second.find("gpulimit:"), std::string::npos) << second;
}

TEST_F(Policy, AJobThatAsksForNothingGetsTheDefaultCapAndNoNotice) {
  write_policy("[defaults]\nmemory = \"512M\"\nmax_memory = \"2G\"\n");
  start_server();

  const std::string output = run_allocator("plain", {});

  EXPECT_EQ(value_of(output, "error"), "CUDA_ERROR_OUT_OF_MEMORY") << output;
  EXPECT_EQ(value_of(output, "bytes"), std::to_string(512 * kMiB)) << output;
  EXPECT_EQ(value_of(output, "total"), std::to_string(512 * kMiB)) << output;
  EXPECT_EQ(output.find("gpulimit:"), std::string::npos) << output;
}

TEST_F(Policy, ACapWithinTheMaximumIsTheJobsOwn) {
  write_policy("[defaults]\nmemory = \"512M\"\nmax_memory = \"2G\"\n");
  start_server();

  const std::string output = run_allocator("within", {"GPULIMIT_MEM=768M"});

  EXPECT_EQ(value_of(output, "bytes"), std::to_string(768 * kMiB)) << output;
  EXPECT_EQ(output.find("gpulimit:"), std::string::npos) << output;
}

TEST_F(Policy, SmWeightAndPriorityAboveTheMaximaAreLowered) {
  write_policy(my_entry() + "max_sm = 30\nmax_weight = 2\nmax_priority = \"normal\"\n");
  start_server();
  const std::string output = dir_.path() + "/spinner.out";
  gpulimit::testing::Process spinner = spawn_program(
      {WORKLOAD_SPINNER_PATH, "--seconds", "30", "--kernel-ns", "1000000"},
      tenant_environment("greedy",
                         {"GPULIMIT_SM=80", "GPULIMIT_WEIGHT=5", "GPULIMIT_PRIORITY=high"}),
      output);

  const nlohmann::json tenant = wait_for_tenant("greedy");
  // The server lists the tenant once it has sent the Welcome; the process
  // prints the notice after it reads it.
  const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
  while (read_file(output).find("gpulimit: the policy lowers") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(20));
  spinner.signal(SIGKILL);
  wait_for_program(spinner, kProgramTimeout);

  ASSERT_FALSE(tenant.is_null()) << read_file(output) << server_->log();
  EXPECT_EQ(tenant["sm_percent"], 30);
  EXPECT_EQ(tenant["weight"], 2);
  EXPECT_EQ(tenant["priority"], "normal");
  EXPECT_EQ(count_of(read_file(output),
                     "gpulimit: the policy lowers --sm 80 to 30, --weight 5 to 2, --priority "
                     "high to normal\n"),
            1u)
      << read_file(output);
}

TEST_F(Policy, ADeviceTheUserMayNotUseIsRefusedWithTheReason) {
  write_policy(my_entry() + "devices = [\"GPU-ffffffff-ffff-ffff-ffff-ffffffffffff\"]\n");
  start_server();

  const std::string output = run_allocator("elsewhere", {});

  EXPECT_NE(output.find("gpulimit: the policy (" + policy_path() + ") lets uid " +
                        std::to_string(::getuid()) +
                        " use GPU-ffffffff-ffff-ffff-ffff-ffffffffffff, not GPU-"),
            std::string::npos)
      << output;
  EXPECT_NE(server_->log().find("refused"), std::string::npos);
}

TEST_F(Policy, SighupAppliesAGoodFileToRunningTenantsAndKeepsTheOldOneOverABrokenOne) {
  write_policy(my_entry() + "max_weight = 2\n");
  start_server();
  TestClient running(server_->socket());
  HelloOptions asks_8;
  asks_8.tenant = "running";
  asks_8.weight = 8;
  ASSERT_TRUE(running.hello(asks_8));
  ASSERT_EQ(wait_for_tenant("running")["weight"], 2);

  // A good file: the running tenant's share follows it.
  write_policy(my_entry() + "max_weight = 5\n");
  ASSERT_EQ(kill(server_->pid(), SIGHUP), 0);
  ASSERT_TRUE(wait_for_log("policy reloaded from " + policy_path())) << server_->log();
  EXPECT_EQ(wait_for_tenant("running")["weight"], 5);

  // A broken one: refused with where, and the policy in force stays.
  write_policy(my_entry() + "max_weight = 0\n");
  ASSERT_EQ(kill(server_->pid(), SIGHUP), 0);
  ASSERT_TRUE(wait_for_log("policy not reloaded; the one in force stays: " + policy_path() +
                           ":2:14: max_weight 0: not a whole number from 1 to 1000"))
      << server_->log();
  TestClient later(server_->socket());
  HelloOptions asks_9;
  asks_9.tenant = "later";
  asks_9.weight = 9;
  ASSERT_TRUE(later.hello(asks_9));
  EXPECT_EQ(wait_for_tenant("later")["weight"], 5);
  EXPECT_EQ(wait_for_tenant("running")["weight"], 5);
}

TEST_F(Policy, AReloadedMemoryMaximumAppliesToTheNextJob) {
  write_policy(my_entry() + "max_memory = \"1G\"\n");
  start_server();
  ASSERT_EQ(value_of(run_allocator("before", {"GPULIMIT_MEM=2G"}), "bytes"),
            std::to_string(1024 * kMiB));

  write_policy(my_entry() + "max_memory = \"1536M\"\n");
  ASSERT_EQ(kill(server_->pid(), SIGHUP), 0);
  ASSERT_TRUE(wait_for_log("policy reloaded from " + policy_path())) << server_->log();
  const std::string output = run_allocator("after", {"GPULIMIT_MEM=2G"});

  EXPECT_EQ(value_of(output, "bytes"), std::to_string(1536 * kMiB)) << output;
}

TEST_F(Policy, UnknownKeysAndUsersAreWarnedAboutAndTheRestApplies) {
  write_policy(my_entry() +
               "max_wieght = 2\nmax_memory = \"1G\"\n[users.nobody-here-at-all]\nmax_sm = 5\n");
  start_server();

  const std::string output = run_allocator("warned", {"GPULIMIT_MEM=2G"});

  EXPECT_EQ(value_of(output, "bytes"), std::to_string(1024 * kMiB)) << output;
  EXPECT_NE(server_->log().find(policy_path() + ":2:1: unknown key 'max_wieght'"),
            std::string::npos)
      << server_->log();
  EXPECT_NE(server_->log().find(policy_path() + ":4:8: unknown user 'nobody-here-at-all'"),
            std::string::npos)
      << server_->log();
}

TEST_F(Policy, ABrokenFileStopsTheServerFromStartingWithOneLine) {
  write_policy("[defaults]\nsm = 150\n");

  const CommandOutcome sut = run_gpulimitd(
      {"--foreground", "--socket", dir_.path() + "/gpulimitd.sock", "--policy", policy_path()});

  EXPECT_EQ(sut.status, 1);
  EXPECT_EQ(sut.stderr_text.rfind(
                "gpulimitd: " + policy_path() + ":2:6: sm 150: not a percentage from 1 to 100", 0),
            0u)
      << sut.stderr_text;
  EXPECT_EQ(count_of(sut.stderr_text, "\n"), 1u) << sut.stderr_text;
}

TEST_F(Policy, AMissingFileNamedByPolicyStopsTheServer) {
  const CommandOutcome sut = run_gpulimitd(
      {"--foreground", "--socket", dir_.path() + "/gpulimitd.sock", "--policy", policy_path()});

  EXPECT_EQ(sut.status, 1);
  EXPECT_EQ(sut.stderr_text, "gpulimitd: cannot read the policy file " + policy_path() +
                                 ": No such file or directory\n");
}

}  // namespace
}  // namespace server_test
