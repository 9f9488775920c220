// gpulimit and gpulimitd: which server a job is given, the user's own
// started on demand and detached from the job, what happens when there is
// none, and `gpulimit status`. A stand-in plays the server (named with
// GPULIMIT_SERVER), so that these tests run before and apart from
// gpulimitd; the last ones start the real gpulimitd where this build has
// one. Each test has its own XDG_RUNTIME_DIR, so its servers are its own.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_process.h"
#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/messages.h"
#include "gpulimit/testing/simulated_machine.h"
#include "workload_process.h"

namespace integration {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kGpulimit = GPULIMIT_CLI_PATH;
const std::string kPrintEnvironment = PRINT_ENVIRONMENT_PATH;
const std::string kPreloadStandIn = PRELOAD_STAND_IN_PATH;
const std::string kStandInServer = STAND_IN_SERVER_PATH;
const std::string kGpulimitd = GPULIMITD_PATH;  // empty until this build makes one

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(prefix)) lines.push_back(line);
  return lines;
}

// The value of `key` in a line of key=value words; args= runs to the end.
std::string field(const std::string& line, const std::string& key) {
  const std::size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const std::size_t start = at + key.size() + 2;
  if (key == "args") return line.substr(start);
  return line.substr(start, line.find(' ', start) - start);
}

bool listening(const std::string& socket) {
  std::string error;
  const int fd = gpulimit::protocol::connect_to(socket, error);
  if (fd < 0) return false;
  close(fd);
  return true;
}

// Gone, or a zombie nobody reaps yet: either way it serves nothing.
bool process_ended(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const std::size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

bool ends_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!process_ended(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

class GpulimitServer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (listening(gpulimit::protocol::kSystemSocketPath)) {
      GTEST_SKIP() << "a gpulimitd listens at " << gpulimit::protocol::kSystemSocketPath
                   << ": gpulimit would use it, not the server of the test";
    }
    ASSERT_FALSE(dir_.path().empty());
    library_ = dir_.path() + "/libgpulimit.so";
    fs::copy_file(kPreloadStandIn, library_);
    runtime_ = dir_.path() + "/run";
    ASSERT_EQ(mkdir(runtime_.c_str(), 0700), 0);
    socket_ = runtime_ + "/gpulimit/gpulimitd.sock";
    log_ = runtime_ + "/gpulimit/gpulimitd.log";
    marker_ = dir_.path() + "/command-ran";
  }

  void TearDown() override {
    for (const pid_t pid : servers_) {
      kill(pid, SIGTERM);
      if (!ends_within(pid, 3s)) kill(pid, SIGKILL);
    }
    for (const pid_t pid : stand_in_pids()) {
      kill(pid, SIGTERM);
      if (!ends_within(pid, 3s)) kill(pid, SIGKILL);
    }
  }

  // PATH, the stand-in libgpulimit.so, this test's XDG_RUNTIME_DIR, `extra`.
  std::vector<std::string> without_server(const std::vector<std::string>& extra = {}) const {
    const char* path = std::getenv("PATH");
    std::vector<std::string> variables = {
        std::string("PATH=") + (path && *path ? path : "/usr/bin:/bin"),
        "ASAN_OPTIONS=verify_asan_link_order=0",
        "GPULIMIT_LIBRARY=" + library_,
        "XDG_RUNTIME_DIR=" + runtime_,
    };
    variables.insert(variables.end(), extra.begin(), extra.end());
    return variables;
  }

  // As without_server, with the stand-in as the server to start.
  std::vector<std::string> environment(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> variables = without_server({"GPULIMIT_SERVER=" + kStandInServer});
    variables.insert(variables.end(), extra.begin(), extra.end());
    return variables;
  }

  CliRun gpulimit(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    return run_program(kGpulimit, args, env, dir_.path());
  }

  Variables job_environment(std::vector<std::string> args, const std::vector<std::string>& env) {
    args.insert(args.end(), {"--", kPrintEnvironment});
    const CliRun run = gpulimit(args, env);
    EXPECT_TRUE(run.exited_with(0)) << run.describe();
    EXPECT_EQ(run.err, "");
    return parse_environment(run.out);
  }

  // Exit status 2, one line on stderr containing `expected`, nothing run.
  void expect_refused(std::vector<std::string> args, const std::vector<std::string>& env,
                      const std::string& expected) {
    SCOPED_TRACE(::testing::PrintToString(args));
    args.insert(args.end(), {"--", "/bin/sh", "-c", "touch " + marker_});
    const CliRun run = gpulimit(args, env);
    EXPECT_TRUE(run.exited_with(2)) << run.describe();
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_TRUE(run.err.starts_with("gpulimit: ")) << run.err;
    EXPECT_NE(run.err.find(expected), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(marker_)) << "the command ran";
  }

  // The stand-in's "started ..." lines in the log of this test's server.
  std::vector<std::string> starts() const { return lines_starting(read_text(log_), "started "); }

  std::vector<pid_t> stand_in_pids() const {
    std::vector<pid_t> pids;
    for (const std::string& line : starts())
      pids.push_back(static_cast<pid_t>(std::stol(field(line, "pid"))));
    return pids;
  }

  TemporaryDirectory dir_;
  std::string library_;
  std::string runtime_;
  std::string socket_;
  std::string log_;
  std::string marker_;
  std::vector<pid_t> servers_;  // real gpulimitd processes to stop
};

TEST_F(GpulimitServer, StartsTheUsersServerAndHandsTheJobItsSocketAndLimits) {
  const Variables job = job_environment(
      {"--sm", "30", "--weight", "2", "--priority", "high", "--mem", "10G"}, environment());
  EXPECT_EQ(job.at("GPULIMIT_SOCKET"), socket_);
  EXPECT_EQ(job.at("GPULIMIT_SM"), "30");
  EXPECT_EQ(job.at("GPULIMIT_WEIGHT"), "2");
  EXPECT_EQ(job.at("GPULIMIT_PRIORITY"), "high");
  EXPECT_EQ(job.at("GPULIMIT_MEM"), "10G");

  const std::vector<std::string> started = starts();
  ASSERT_EQ(started.size(), 1u) << read_text(log_);
  EXPECT_EQ(field(started[0], "args"), "--socket " + socket_ + " --idle-exit-s 600");
  EXPECT_TRUE(listening(socket_)) << "the server ends with gpulimit";
  struct stat directory {};
  ASSERT_EQ(stat((runtime_ + "/gpulimit").c_str(), &directory), 0);
  EXPECT_EQ(directory.st_mode & 0777, 0700u);
}

TEST_F(GpulimitServer, TheServerIsNoProcessOfTheJob) {
  const CliRun run = gpulimit({"--weight", "3", "--", kPrintEnvironment},
                              environment({"LD_PRELOAD=" + library_, "CUDA_VISIBLE_DEVICES=1"}));
  ASSERT_TRUE(run.exited_with(0)) << run.describe();
  const std::vector<std::string> started = starts();
  ASSERT_EQ(started.size(), 1u) << read_text(log_);
  const std::string pid = field(started[0], "pid");
  // A session of its own, so no signal for the job's terminal reaches it.
  EXPECT_EQ(field(started[0], "sid"), pid) << started[0];
  EXPECT_EQ(field(started[0], "pgid"), pid) << started[0];
  // Not a child of gpulimit, which became the job.
  EXPECT_NE(field(started[0], "ppid"), std::to_string(run.pid)) << started[0];
  // stdin, stdout and stderr only: no pipe of the caller's is held open.
  EXPECT_EQ(field(started[0], "fds"), "0,1,2") << started[0];
  // Neither preloaded nor narrowed to the devices of one job.
  EXPECT_EQ(field(started[0], "preload"), "-") << started[0];
  EXPECT_EQ(field(started[0], "mask"), "-") << started[0];
  EXPECT_EQ(parse_environment(run.out).at("GPULIMIT_SOCKET"), socket_);
}

TEST_F(GpulimitServer, AJobWithoutComputeLimitsIsTimeSlicedToo) {
  EXPECT_EQ(job_environment({"--mem", "1G"}, environment()).at("GPULIMIT_SOCKET"), socket_);
}

TEST_F(GpulimitServer, ReusesARunningServer) {
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(job_environment({"--sm", "50"}, environment()).at("GPULIMIT_SOCKET"), socket_);
  EXPECT_EQ(starts().size(), 1u) << read_text(log_);
}

TEST_F(GpulimitServer, UsesTheCallersSocketAsItIs) {
  ASSERT_EQ(job_environment({"--sm", "50"}, environment()).at("GPULIMIT_SOCKET"), socket_);

  // Another runtime directory: the caller's socket is used, none is started.
  const std::string other = dir_.path() + "/other";
  ASSERT_EQ(mkdir(other.c_str(), 0700), 0);
  const Variables job = job_environment(
      {"--weight", "2"}, environment({"GPULIMIT_SOCKET=" + socket_, "XDG_RUNTIME_DIR=" + other}));
  EXPECT_EQ(job.at("GPULIMIT_SOCKET"), socket_);
  EXPECT_FALSE(fs::exists(other + "/gpulimit"));
  EXPECT_EQ(starts().size(), 1u);
}

TEST_F(GpulimitServer, ACallersSocketNobodyListensAtIsNotReplaced) {
  const std::string nobody = dir_.path() + "/nobody.sock";
  expect_refused({"--sm", "30"}, environment({"GPULIMIT_SOCKET=" + nobody}),
                 "gpulimit: --sm 30 needs gpulimitd: nobody listens at GPULIMIT_SOCKET=" + nobody +
                     " (No such file or directory)");

  const CliRun run = gpulimit({"--mem", "1G", "--", kPrintEnvironment},
                              environment({"GPULIMIT_SOCKET=" + nobody}));
  ASSERT_TRUE(run.exited_with(0)) << run.describe();
  EXPECT_EQ(run.err,
            "gpulimit: time-slicing is off, memory caps only: nobody listens at "
            "GPULIMIT_SOCKET=" +
                nobody + " (No such file or directory)\n");
  const Variables job = parse_environment(run.out);
  EXPECT_EQ(job.count("GPULIMIT_SOCKET"), 0u);
  EXPECT_EQ(job.at("GPULIMIT_MEM"), "1G");
  EXPECT_FALSE(fs::exists(log_)) << "a server was started";
}

TEST_F(GpulimitServer, NoServerStartsNoneAndGivesNoSocket) {
  const CliRun run = gpulimit({"--no-server", "--mem", "1G", "--", kPrintEnvironment},
                              environment({"GPULIMIT_SOCKET=" + socket_}));
  ASSERT_TRUE(run.exited_with(0)) << run.describe();
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(parse_environment(run.out).count("GPULIMIT_SOCKET"), 0u);
  EXPECT_FALSE(fs::exists(runtime_ + "/gpulimit"));

  expect_refused({"--no-server", "--sm", "30"}, environment(),
                 "--sm 30: a limit of GPU time needs gpulimitd, and --no-server runs without it");
  EXPECT_FALSE(fs::exists(runtime_ + "/gpulimit"));
}

TEST_F(GpulimitServer, RefusesComputeLimitsWhenNoServerCanBeStarted) {
  const std::string missing = dir_.path() + "/no-such-gpulimitd";
  const auto env = without_server({"GPULIMIT_SERVER=" + missing});
  const std::string why =
      "needs gpulimitd: GPULIMIT_SERVER=" + missing + ": No such file or directory";
  expect_refused({"--sm", "30", "--mem", "1G"}, env, "gpulimit: --sm 30 " + why);
  expect_refused({"--priority", "low"}, env, "--priority low " + why);
  std::vector<std::string> weight = env;
  weight.push_back("GPULIMIT_WEIGHT=2");
  expect_refused({}, weight, "GPULIMIT_WEIGHT=2 " + why);
  std::vector<std::string> hami = env;
  hami.push_back("CUDA_DEVICE_SM_LIMIT=50");
  expect_refused({}, hami, "CUDA_DEVICE_SM_LIMIT=50 " + why);
}

TEST_F(GpulimitServer, RefusesComputeLimitsWhenTheServerExitsAtOnce) {
  // `false` is looked up in PATH, and exits before it listens.
  expect_refused({"--weight", "2"}, without_server({"GPULIMIT_SERVER=false"}),
                 "false exited with status 1 before it accepted connections at " + socket_ +
                     " (log: " + log_ + ")");
  expect_refused(
      {"--sm", "20"}, environment({"STAND_IN_SERVER_MODE=exit"}),
      kStandInServer + " exited with status 3 before it accepted connections at " + socket_);
}

TEST_F(GpulimitServer, GivesUpOnAServerThatNeverListens) {
  const auto before = std::chrono::steady_clock::now();
  expect_refused({"--sm", "20"}, environment({"STAND_IN_SERVER_MODE=never-listen"}),
                 kStandInServer + " did not accept connections at " + socket_ +
                     " within 5 s (log: " + log_ + ")");
  const auto took = std::chrono::steady_clock::now() - before;
  EXPECT_GE(took, 5s);
  EXPECT_LT(took, 15s);
  // And stopped it: a server that never listens serves no later job.
  const std::vector<pid_t> pids = stand_in_pids();
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_TRUE(ends_within(pids[0], 3s));
}

TEST_F(GpulimitServer, RunsWithMemoryCapsOnlyWhenNoServerCanBeStarted) {
  const std::string missing = dir_.path() + "/no-such-gpulimitd";
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{{}, {"CUDA_DEVICE_SM_LIMIT=0"}}) {
    std::vector<std::string> env = without_server({"GPULIMIT_SERVER=" + missing});
    env.insert(env.end(), extra.begin(), extra.end());
    const CliRun run = gpulimit({"--mem", "2G", "--", kPrintEnvironment}, env);
    ASSERT_TRUE(run.exited_with(0)) << run.describe();
    EXPECT_EQ(run.err, "gpulimit: time-slicing is off, memory caps only: GPULIMIT_SERVER=" +
                           missing + ": No such file or directory\n");
    const Variables job = parse_environment(run.out);
    EXPECT_EQ(job.at("GPULIMIT_MEM"), "2G");
    EXPECT_EQ(job.count("GPULIMIT_SOCKET"), 0u);
  }
}

TEST_F(GpulimitServer, RefusesARuntimeDirectoryOthersCanWriteTo) {
  ASSERT_EQ(mkdir((runtime_ + "/gpulimit").c_str(), 0777), 0);
  ASSERT_EQ(chmod((runtime_ + "/gpulimit").c_str(), 0777), 0);
  expect_refused({"--sm", "30"}, environment(),
                 "--sm 30 needs gpulimitd: will not use " + socket_ + ": " + runtime_ +
                     "/gpulimit is not a directory of uid " + std::to_string(getuid()) +
                     " that only it can write to");
}

TEST_F(GpulimitServer, StatusWithoutAServerIsExitStatus1) {
  for (const char* json : {"", "--json"}) {
    std::vector<std::string> args = {"status"};
    if (*json) args.push_back(json);
    const CliRun run = gpulimit(args, environment());
    EXPECT_TRUE(run.exited_with(1)) << run.describe();
    EXPECT_EQ(run.out, "");
    EXPECT_EQ(run.err, std::string("gpulimit: no gpulimitd running (nobody listens at ") +
                           gpulimit::protocol::kSystemSocketPath + " or " + socket_ + ")\n");
  }
  EXPECT_FALSE(fs::exists(runtime_ + "/gpulimit")) << "status started a server";

  const std::string nobody = dir_.path() + "/nobody.sock";
  const CliRun given = gpulimit({"status"}, environment({"GPULIMIT_SOCKET=" + nobody}));
  EXPECT_TRUE(given.exited_with(1)) << given.describe();
  EXPECT_EQ(given.err, "gpulimit: no gpulimitd running (nobody listens at GPULIMIT_SOCKET=" +
                           nobody + " (No such file or directory))\n");
}

TEST_F(GpulimitServer, StatusRefusesMistakesWithExitStatus2) {
  const CliRun extra = gpulimit({"status", "--all"}, environment());
  EXPECT_TRUE(extra.exited_with(2)) << extra.describe();
  EXPECT_EQ(extra.err,
            "gpulimit: status: unknown argument --all (usage: gpulimit status [--json])\n");

  const CliRun socket = gpulimit({"status"}, environment({"GPULIMIT_SOCKET=relative.sock"}));
  EXPECT_TRUE(socket.exited_with(2)) << socket.describe();
  EXPECT_EQ(socket.err, "gpulimit: GPULIMIT_SOCKET=relative.sock: not an absolute path\n");
}

TEST_F(GpulimitServer, StatusShowsTheRunningServer) {
  ASSERT_EQ(job_environment({"--sm", "50"}, environment()).at("GPULIMIT_SOCKET"), socket_);
  const std::vector<pid_t> pids = stand_in_pids();
  ASSERT_EQ(pids.size(), 1u);

  const CliRun json = gpulimit({"status", "--json"}, environment());
  ASSERT_TRUE(json.exited_with(0)) << json.describe();
  EXPECT_EQ(json.err, "");
  const nlohmann::json status = nlohmann::json::parse(json.out);
  EXPECT_EQ(status.at("server").at("pid"), pids[0]);
  EXPECT_EQ(status.at("server").at("socket"), socket_);

  const CliRun table = gpulimit({"status"}, environment());
  ASSERT_TRUE(table.exited_with(0)) << table.describe();
  EXPECT_EQ(table.err, "");
  EXPECT_TRUE(table.out.starts_with("gpulimitd " + std::to_string(pids[0]) +
                                    ", user mode, up 1s, quantum 20 ms, socket " + socket_ + "\n"))
      << table.out;
  EXPECT_NE(table.out.find("GPU-fa4ec0da-0000-4000-8000-000000000000"), std::string::npos)
      << table.out;
  EXPECT_TRUE(table.out.ends_with("no tenants\n")) << table.out;

  // Through the caller's socket too, from anywhere.
  const CliRun given =
      gpulimit({"status", "--json"},
               without_server({"GPULIMIT_SOCKET=" + socket_, "XDG_RUNTIME_DIR=" + dir_.path()}));
  ASSERT_TRUE(given.exited_with(0)) << given.describe();
  EXPECT_EQ(given.out, json.out);
}

// The real gpulimitd, found by the build tree's gpulimit beside it, on the
// simulated driver.
class RealGpulimitd : public GpulimitServer {
 protected:
  void SetUp() override {
    if (kGpulimitd.empty()) GTEST_SKIP() << "this build has no gpulimitd target yet";
    GpulimitServer::SetUp();
  }

  std::vector<std::string> real_environment() const {
    return without_server(gpulimit::testing::assignments(
        gpulimit::testing::with(machine_.environment(), "FAKECUDA_DEVICES", "2")));
  }

  // No memory sizes: the simulator's own.
  gpulimit::testing::SimulatedMachine machine_{gpulimit::testing::MachineShape{1, "", ""}};
};

TEST_F(RealGpulimitd, StartsOnDemandAndAnswersStatus) {
  const CliRun run = gpulimit({"--sm", "30", "--", kPrintEnvironment}, real_environment());
  ASSERT_TRUE(run.exited_with(0)) << run.describe() << "\nlog:\n" << read_text(log_);
  EXPECT_EQ(run.err, "");
  EXPECT_EQ(parse_environment(run.out).at("GPULIMIT_SOCKET"), socket_);

  const CliRun json = gpulimit({"status", "--json"}, real_environment());
  ASSERT_TRUE(json.exited_with(0)) << json.describe();
  const nlohmann::json status = nlohmann::json::parse(json.out);
  const nlohmann::json& server = status.at("server");
  servers_.push_back(server.at("pid").get<pid_t>());
  EXPECT_EQ(server.at("mode"), "user");
  EXPECT_EQ(server.at("socket"), socket_);
  EXPECT_EQ(server.at("protocol"), gpulimit::protocol::kVersion);
  EXPECT_TRUE(status.at("devices").is_array());
  EXPECT_TRUE(status.at("tenants").is_array());

  const CliRun table = gpulimit({"status"}, real_environment());
  ASSERT_TRUE(table.exited_with(0)) << table.describe();
  EXPECT_TRUE(
      table.out.starts_with("gpulimitd " + std::to_string(servers_.back()) + ", user mode, "))
      << table.out;

  // Started once, used again.
  EXPECT_EQ(job_environment({"--weight", "2"}, real_environment()).at("GPULIMIT_SOCKET"), socket_);
  const CliRun again = gpulimit({"status", "--json"}, real_environment());
  ASSERT_TRUE(again.exited_with(0)) << again.describe();
  EXPECT_EQ(nlohmann::json::parse(again.out).at("server").at("pid"), servers_.back());
}

}  // namespace
}  // namespace integration
