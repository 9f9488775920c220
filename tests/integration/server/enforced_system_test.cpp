// Where the administrator enforces: the system gpulimitd serving with a
// policy, on its own paths (in a /run of the test's own: in_private_run.sh).
// A process that server refuses, or cannot reach, must get no CUDA, and no
// environment may send a process to another server or to none. Each test
// measures what the device really holds with NVML, without the preload.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/testing/process.h"
#include "gpulimit/testing/simulated_machine.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "workload_output.h"

namespace server_test {
namespace {

using std::chrono::milliseconds;
using namespace gpulimit::testing;

constexpr milliseconds kProgramTimeout{60'000};
constexpr uint64_t kMiB = uint64_t{1} << 20;
const std::string kMarker = gpulimit::protocol::kEnforcementMarkerPath;
const std::string kRefusal =
    "the administrator enforces gpulimit on this machine, so CUDA is refused";

bool exists(const std::string& path) {
  struct stat status {};
  return lstat(path.c_str(), &status) == 0;
}

class EnforcedSystem : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("GPULIMIT_TEST_NO_PRIVATE_RUN"))
      GTEST_SKIP() << "needs root for a /run of its own (in_private_run.sh)";
    ASSERT_EQ(mkdir("/run/gpulimit", 0755), 0) << "the test's /run is its own and empty";
  }
  void TearDown() override {
    if (server_.pid() > 0 && !server_.reaped()) {
      server_.signal(SIGKILL);
      server_.wait_for_exit(milliseconds(10'000));
    }
  }

  // The system server, on its default socket, with `policy` as its file.
  void start_system_server(const std::string& policy) {
    const std::string policy_path = dir_.path() + "/policy.toml";
    std::vector<std::string> argv = {
        GPULIMITD_PATH,      "--system", "--foreground",     "--watch", "off",
        "--metrics-address", "off",      "--cross-check-ms", "0"};
    if (!policy.empty()) {
      std::ofstream(policy_path) << policy;
      argv.insert(argv.end(), {"--policy", policy_path});
    }
    Launch launch;
    launch.argv = argv;
    launch.environment = assignments(machine_.environment());  // NVML of the simulated GPUs
    launch.err = Stream::file(log_path(), /*append=*/true);
    launch.dies_with_test = true;
    server_ = Process(launch);
    const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      std::string error;
      const int fd = gpulimit::protocol::connect_to(gpulimit::protocol::kSystemSocketPath, error);
      if (fd >= 0) close(fd);
      // Its socket listens before it settles the marker; "serving on" comes after.
      if (fd >= 0 && read_file(log_path()).find("serving on") != std::string::npos) return;
      ASSERT_FALSE(server_.wait_for_exit(milliseconds(0))) << read_file(log_path());
      std::this_thread::sleep_for(milliseconds(5));
    }
    FAIL() << "the system server never served\n" << read_file(log_path());
  }
  std::string log_path() const { return dir_.path() + "/gpulimitd.log"; }

  // A process of no gpulimit job (the library preloaded, as /etc/ld.so.preload
  // would, and `extra` in its environment) allocating up to 2 GiB; its output.
  struct Run {
    int status = -1;
    std::string output;
  };
  Run run_allocator(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> environment =
        assignments(machine_.tenant_environment(dir_.path(), "", ""));
    environment.insert(environment.end(), extra.begin(), extra.end());
    const std::string output = dir_.path() + "/allocator" + std::to_string(++runs_) + ".out";
    Process allocator = spawn_program(
        {WORKLOAD_ALLOCATOR_PATH, "--path", "linear", "--target", "2G", "--chunk", "64M"},
        environment, output);
    Run run;
    run.status = wait_for_program(allocator, kProgramTimeout);
    run.output = read_file(output);
    return run;
  }

  void expect_refused(const Run& run) {
    EXPECT_NE(run.status, 0) << run.output;
    EXPECT_NE(run.output.find(kRefusal), std::string::npos) << run.output;
    const std::string bytes = value_of(run.output, "bytes");
    EXPECT_TRUE(bytes.empty() || bytes == "0") << run.output;
  }

  TemporaryDirectory dir_;
  SimulatedMachine machine_{MachineShape{2, "4G", "0"}};
  Process server_;
  int runs_ = 0;
};

TEST_F(EnforcedSystem, TheServerMarksThatItEnforcesAndAStopUnmarks) {
  start_system_server("[defaults]\nmax_memory = \"1G\"\n");
  struct stat status {};
  ASSERT_EQ(lstat(kMarker.c_str(), &status), 0) << read_file(log_path());
  EXPECT_TRUE(S_ISREG(status.st_mode));
  EXPECT_EQ(status.st_uid, 0u);
  server_.signal(SIGTERM);
  ASSERT_TRUE(server_.wait_for_exit(kProgramTimeout));
  EXPECT_FALSE(exists(kMarker)) << "a clean stop lifts the enforcement";
}

TEST_F(EnforcedSystem, AProcessTheServerRefusesGetsNoCuda) {
  // Device 1 only: every process here sees device 0 too, and names it.
  start_system_server("[defaults]\ndevices = [1]\n");
  expect_refused(run_allocator());
}

TEST_F(EnforcedSystem, AProcessThatFindsTheServerDeadGetsNoCuda) {
  start_system_server("[defaults]\nmax_memory = \"1G\"\n");
  server_.signal(SIGKILL);
  ASSERT_TRUE(server_.wait_for_exit(kProgramTimeout));
  ASSERT_TRUE(exists(kMarker)) << "a server that dies leaves the enforcement in place";
  expect_refused(run_allocator());
}

TEST_F(EnforcedSystem, EveryProcessJoinsTheSystemServerAndGetsThePolicysCap) {
  start_system_server("[defaults]\nmax_memory = \"1G\"\n");
  // No gpulimit variable at all, and one naming another server: both get
  // the system server's policy.
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{},
        std::vector<std::string>{"GPULIMIT_SOCKET=" + dir_.path() + "/elsewhere.sock"}}) {
    const Run run = run_allocator(extra);
    EXPECT_EQ(run.status, 0) << run.output << read_file(log_path());
    EXPECT_EQ(value_of(run.output, "error"), "CUDA_ERROR_OUT_OF_MEMORY") << run.output;
    EXPECT_EQ(value_of(run.output, "bytes"), std::to_string(1024 * kMiB)) << run.output;
  }
}

TEST_F(EnforcedSystem, WithoutAPolicyNothingIsEnforcedAndAStaleMarkGoes) {
  std::ofstream(kMarker) << "";  // as a server with a policy that died left it
  start_system_server("");
  EXPECT_FALSE(exists(kMarker)) << read_file(log_path());
  const Run run = run_allocator();
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(value_of(run.output, "bytes"), std::to_string(2048 * kMiB)) << run.output;
}

}  // namespace
}  // namespace server_test
