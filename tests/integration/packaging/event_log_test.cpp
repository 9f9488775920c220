// What gpulimitd says in its log, at the default level, about a tenant's
// life: it joins (tenant, user, pid, limits), one of its processes dies
// holding memory, the memory is given back (how much, after whose exit), the
// tenant leaves. One line each, read by an administrator in the journal.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/shm/ledger_inspection.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"

namespace {

using server_test::ServerProcess;
using std::chrono::milliseconds;

// Generous: only a wedged server or workload takes this long.
constexpr milliseconds kPatience{30'000};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first line of `path` that matches `pattern`, waiting for it; empty
// if none comes in time.
std::string wait_for_line(const std::string& path, const std::regex& pattern) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  for (;;) {
    std::istringstream lines(read_file(path));
    for (std::string line; std::getline(lines, line);)
      if (std::regex_search(line, pattern)) return line;
    if (std::chrono::steady_clock::now() >= deadline) return "";
    std::this_thread::sleep_for(milliseconds(20));
  }
}

// "512" and "M", as the server writes a size, in bytes.
uint64_t in_bytes(const std::string& number, const std::string& unit) {
  const std::string units = "KMGT";
  const std::size_t power = unit.empty() ? 0 : units.find(unit) + 1;
  return std::stoull(number) << (10 * power);
}

class EventLog : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(dir_.path(),
                                              std::vector<std::string>{"--log-level", "info"});
    ASSERT_TRUE(server_->wait_until_serving()) << server_->log();
  }

  // An allocator of tenant `tenant` holding 256 MiB under a 1 GiB cap.
  gpulimit::testing::Process start_holder(const std::string& tenant) {
    return server_test::spawn_program(
        {WORKLOAD_ALLOCATOR_PATH, "--target", "256M", "--chunk", "64M", "--hold", "120"},
        {"LD_PRELOAD=" GPULIMIT_LIBRARY_PATH, "LD_LIBRARY_PATH=" FAKECUDA_LIB_DIR,
         "FAKECUDA_STATE=" + dir_.path() + "/fakecuda.state", "FAKECUDA_MEM=4G",
         "GPULIMIT_SOCKET=" + server_->socket(), "GPULIMIT_TENANT=" + tenant,
         "GPULIMIT_LEDGER_DIR=" + dir_.path(), "GPULIMIT_MEM=1G",
         "ASAN_OPTIONS=verify_asan_link_order=0"},
        output_);
  }

  gpulimit::testing::TemporaryDirectory dir_;
  const std::string output_ = dir_.path() + "/allocator.out";
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(EventLog, ATenantsJoinCrashReclaimAndLeaveAreOneLineEach) {
  // Arrange
  gpulimit::testing::Process holder = start_holder("logged-1");
  ASSERT_NE(wait_for_line(output_, std::regex("event=holding")), "") << read_file(output_);
  const std::string log_path = dir_.path() + "/gpulimitd.log";
  const std::string pid = std::to_string(holder.pid());
  // What the ledger charges the tenant: the allocations and the context.
  std::vector<gpulimit::shm::LedgerDeviceUsage> usage;
  std::string error;
  ASSERT_TRUE(gpulimit::shm::read_ledger_usage(
      dir_.path() + "/gpulimit-" + std::to_string(getuid()) + "-logged-1.ledger", getuid(), usage,
      error))
      << error;
  ASSERT_EQ(usage.size(), 1u);
  ASSERT_GE(usage[0].used, 256u << 20);

  // Act
  holder.signal(SIGKILL);
  EXPECT_EQ(server_test::wait_for_program(holder, kPatience), 128 + SIGKILL);
  const std::string given_back =
      wait_for_line(log_path, std::regex("given back after the exit of pid " + pid + "\\b"));
  const std::string left = wait_for_line(log_path, std::regex("tenant logged-1 .* left"));

  // Assert
  const std::string joined = wait_for_line(log_path, std::regex("tenant logged-1 .* joined"));
  EXPECT_TRUE(std::regex_search(joined, std::regex("pid " + pid + "\\b"))) << joined;
  EXPECT_TRUE(std::regex_search(joined, std::regex("user [^ ,]+, uid [0-9]+"))) << joined;
  EXPECT_TRUE(std::regex_search(joined, std::regex("memory device 0 1G"))) << joined;
  EXPECT_TRUE(std::regex_search(joined, std::regex("sm uncapped, weight 1, priority normal")))
      << joined;
  EXPECT_TRUE(std::regex_search(given_back, std::regex("gpulimit-[0-9]+-logged-1")))
      << server_->log();
  std::smatch size;
  ASSERT_TRUE(std::regex_search(given_back, size, std::regex("GPU-[0-9a-f]{8} ([0-9]+)([KMGT]?) ")))
      << given_back;
  EXPECT_EQ(in_bytes(size[1], size[2]), usage[0].used) << given_back;
  EXPECT_TRUE(std::regex_search(left, std::regex("pid " + pid + "\\b"))) << server_->log();
}

TEST_F(EventLog, AProcessThatExitsByItselfHasNothingGivenBack) {
  // Arrange: it frees what it holds and exits.
  gpulimit::testing::Process allocator = server_test::spawn_program(
      {WORKLOAD_ALLOCATOR_PATH, "--target", "128M", "--chunk", "64M"},
      {"LD_PRELOAD=" GPULIMIT_LIBRARY_PATH, "LD_LIBRARY_PATH=" FAKECUDA_LIB_DIR,
       "FAKECUDA_STATE=" + dir_.path() + "/fakecuda.state", "FAKECUDA_MEM=4G",
       "GPULIMIT_SOCKET=" + server_->socket(), "GPULIMIT_TENANT=logged-2",
       "GPULIMIT_LEDGER_DIR=" + dir_.path(), "GPULIMIT_MEM=1G",
       "ASAN_OPTIONS=verify_asan_link_order=0"},
      output_);

  // Act
  EXPECT_EQ(server_test::wait_for_program(allocator, kPatience), 0) << read_file(output_);
  const std::string left =
      wait_for_line(dir_.path() + "/gpulimitd.log", std::regex("tenant logged-2 .* left"));
  server_->stop();

  // Assert
  EXPECT_NE(left, "") << server_->log();
  EXPECT_EQ(server_->log().find("given back"), std::string::npos) << server_->log();
}

}  // namespace
