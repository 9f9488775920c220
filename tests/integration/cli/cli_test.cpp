// The gpulimit command as a user runs it: the environment it hands the job,
// the job's exit status and signals, and every input it refuses before
// running anything. libgpulimit.so is replaced by a library that does
// nothing, named with GPULIMIT_LIBRARY; NVML is the simulator's.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_process.h"
#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/testing/simulated_machine.h"
#include "workload_process.h"

namespace integration {
namespace {

namespace fs = std::filesystem;

const std::string kGpulimit = GPULIMIT_CLI_PATH;
const std::string kPrintEnvironment = PRINT_ENVIRONMENT_PATH;
const std::string kPreloadStandIn = PRELOAD_STAND_IN_PATH;
const std::string kBuildTreeLibrary = GPULIMIT_BUILD_TREE_LIBRARY;

// The simulator's device 1, as NVML and CUDA_VISIBLE_DEVICES name it.
const std::string kSimulatedGpu0 = "GPU-fa4ec0da-0000-4000-8000-000000000000";
const std::string kSimulatedGpu1 = "GPU-fa4ec0da-0000-4000-8000-000000000001";

size_t count_lines_starting(const std::string& text, const std::string& prefix) {
  size_t count = text.starts_with(prefix) ? 1 : 0;
  for (size_t at = text.find('\n' + prefix); at != std::string::npos;
       at = text.find('\n' + prefix, at + 1))
    ++count;
  return count;
}

std::string canonical(const std::string& path) {
  return fs::canonical(path).string();
}

// Each test starts gpulimit with exactly the environment it builds, whatever
// ctest's own holds (a GPU machine may set CUDA_VISIBLE_DEVICES or LD_PRELOAD).
class GpulimitCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    library_ = dir_.path() + "/libgpulimit.so";
    fs::copy_file(kPreloadStandIn, library_);
    marker_ = dir_.path() + "/command-ran";
  }

  // PATH, GPULIMIT_LIBRARY naming the stand-in, then `extra`.
  std::vector<std::string> environment(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> variables = without_library();
    variables.push_back("GPULIMIT_LIBRARY=" + library_);
    variables.insert(variables.end(), extra.begin(), extra.end());
    return variables;
  }

  // PATH, then `extra`: gpulimit looks for the library itself.
  static std::vector<std::string> without_library(const std::vector<std::string>& extra = {}) {
    const char* path = std::getenv("PATH");
    std::vector<std::string> variables = {
        std::string("PATH=") + (path && *path ? path : "/usr/bin:/bin"),
        // In a sanitized build (GPULIMIT_SANITIZE) the job is sanitized too,
        // and gpulimit preloads a library ahead of the sanitizer's runtime.
        "ASAN_OPTIONS=verify_asan_link_order=0",
    };
    variables.insert(variables.end(), extra.begin(), extra.end());
    return variables;
  }

  // The simulator's NVML with `devices` GPUs, on a machine of this test's own.
  std::vector<std::string> simulated_gpus(unsigned devices) const {
    return gpulimit::testing::assignments(gpulimit::testing::with(
        machine_.environment(), "FAKECUDA_DEVICES", std::to_string(devices)));
  }

  // With --no-server: these tests are about everything but the server
  // (server_test.cpp), so none starts one, and stderr holds only what a
  // test looks for.
  CliRun gpulimit(std::vector<std::string> args, const std::vector<std::string>& env,
                  const std::string& working_dir = "") {
    args.insert(args.begin(), "--no-server");
    return run_program(kGpulimit, args, env, dir_.path(), working_dir);
  }

  // The environment of a job started with `args` (gpulimit's, before "--").
  Variables job_environment(std::vector<std::string> args, const std::vector<std::string>& env) {
    args.insert(args.end(), {"--", kPrintEnvironment});
    const CliRun run = gpulimit(args, env);
    EXPECT_TRUE(run.exited_with(0)) << run.describe();
    return parse_environment(run.out);
  }

  // gpulimit with `args` must exit with status 2 and one line on stderr
  // containing `expected`, and not run the command, which would create a
  // file. `with_command`: whether a command follows `args`.
  void expect_refused(std::vector<std::string> args, const std::vector<std::string>& env,
                      const std::string& expected, bool with_command = true) {
    SCOPED_TRACE(::testing::PrintToString(args));
    if (with_command) args.insert(args.end(), {"--", "/bin/sh", "-c", "touch " + marker_});
    const CliRun run = gpulimit(args, env);
    EXPECT_TRUE(run.exited_with(2)) << run.describe();
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_TRUE(run.err.starts_with("gpulimit: ")) << run.err;
    EXPECT_TRUE(run.err.ends_with("\n")) << run.err;
    EXPECT_NE(run.err.find(expected), std::string::npos) << run.err;
    EXPECT_EQ(run.out, "");
    EXPECT_FALSE(fs::exists(marker_)) << "the command ran";
  }

  TemporaryDirectory dir_;
  // No memory sizes: the simulator's own.
  gpulimit::testing::SimulatedMachine machine_{gpulimit::testing::MachineShape{1, "", ""}};
  std::string library_;
  std::string marker_;
};

TEST_F(GpulimitCli, HandsTheJobItsLimitsNormalised) {
  const Variables job = job_environment({"--mem", "10240M", "--device-mem", "1=50%,0=512m"},
                                        environment(simulated_gpus(2)));
  EXPECT_EQ(job.at("GPULIMIT_MEM"), "10G");
  // Bound to the GPUs the indices name (the driver says which), by UUID.
  EXPECT_EQ(job.at("GPULIMIT_DEVICE_MEM"), kSimulatedGpu0 + "=512M," + kSimulatedGpu1 + "=50%");
  EXPECT_FALSE(job.contains("GPULIMIT_LEDGER_DIR"));
}

TEST_F(GpulimitCli, AFlagReplacesItsVariableAndTheRestPassesNormalised) {
  const CliRun run = gpulimit(
      {"--mem", "2G", "--", kPrintEnvironment},
      environment({"GPULIMIT_MEM=1G", "GPULIMIT_MEM=3G", "GPULIMIT_LEDGER_DIR=/tmp/ledgers",
                   "CUDA_DEVICE_MEMORY_LIMIT_0=1048576k"}));
  ASSERT_TRUE(run.exited_with(0)) << run.describe();
  EXPECT_EQ(count_lines_starting(run.out, "GPULIMIT_MEM="), 1u) << run.out;
  const Variables job = parse_environment(run.out);
  EXPECT_EQ(job.at("GPULIMIT_MEM"), "2G");
  // No driver to say which GPU index 0 is: the index stays, for the job's
  // first process to bind. HAMi's variable goes: its cap is in the list.
  EXPECT_EQ(job.at("GPULIMIT_DEVICE_MEM"), "0=1G");
  EXPECT_FALSE(job.contains("CUDA_DEVICE_MEMORY_LIMIT_0"));
  EXPECT_EQ(job.at("GPULIMIT_LEDGER_DIR"), "/tmp/ledgers");
}

TEST_F(GpulimitCli, ReadsHamiVariablesAndKeepsThem) {
  const Variables job = job_environment({}, environment({"CUDA_DEVICE_MEMORY_LIMIT=2048m"}));
  EXPECT_EQ(job.at("GPULIMIT_MEM"), "2G");
  EXPECT_EQ(job.at("CUDA_DEVICE_MEMORY_LIMIT"), "2048m");
}

TEST_F(GpulimitCli, PreloadsTheLibraryByItsAbsolutePath) {
  EXPECT_EQ(job_environment({"--mem", "1G"}, environment()).at("LD_PRELOAD"), canonical(library_));

  // Relative to where gpulimit starts; the job may change directory.
  const CliRun run = gpulimit({"--mem", "1G", "--", kPrintEnvironment},
                              without_library({"GPULIMIT_LIBRARY=./libgpulimit.so"}), dir_.path());
  ASSERT_TRUE(run.exited_with(0)) << run.describe();
  EXPECT_EQ(parse_environment(run.out).at("LD_PRELOAD"), canonical(library_));
}

TEST_F(GpulimitCli, PutsTheLibraryFirstKeepingOtherPreloadsWithoutASecondCopy) {
  fs::create_directory(dir_.path() + "/other");
  const std::string extra = dir_.path() + "/other/libextra.so";
  const std::string extra2 = dir_.path() + "/other/libextra2.so";
  const std::string link = dir_.path() + "/other/link.so";
  fs::copy_file(kPreloadStandIn, extra);
  fs::copy_file(kPreloadStandIn, extra2);
  fs::create_symlink(library_, link);

  const Variables job = job_environment(
      {"--mem", "1G"},
      environment({"LD_PRELOAD=" + extra + " " + library_ + ":" + link + "::" + extra2}));
  EXPECT_EQ(job.at("LD_PRELOAD"), canonical(library_) + ":" + extra + ":" + extra2);

  // Another build's or install's copy would hook every call a second time.
  fs::create_directory(dir_.path() + "/elsewhere");
  const std::string other_copy = dir_.path() + "/elsewhere/libgpulimit.so";
  fs::copy_file(kPreloadStandIn, other_copy);
  EXPECT_EQ(
      job_environment({"--mem", "1G"}, environment({"LD_PRELOAD=" + other_copy + ":" + extra}))
          .at("LD_PRELOAD"),
      canonical(library_) + ":" + extra);
}

TEST_F(GpulimitCli, StartsEachJobAsANewTenant) {
  const std::vector<std::string> args = {"--mem", "1G", "--", kPrintEnvironment};
  const CliRun first = gpulimit(args, environment());
  const CliRun second = gpulimit(args, environment());
  ASSERT_TRUE(first.exited_with(0)) << first.describe();
  ASSERT_TRUE(second.exited_with(0)) << second.describe();

  // <uid>-<pid>-<random>, where pid is the job's own: gpulimit became it.
  const std::string tenant = parse_environment(first.out).at("GPULIMIT_TENANT");
  const std::string prefix = std::to_string(getuid()) + "-" + std::to_string(first.pid) + "-";
  ASSERT_TRUE(tenant.starts_with(prefix)) << tenant;
  const std::string random = tenant.substr(prefix.size());
  EXPECT_EQ(random.size(), 16u) << tenant;
  EXPECT_EQ(random.find_first_not_of("0123456789abcdef"), std::string::npos) << tenant;
  EXPECT_NE(parse_environment(second.out).at("GPULIMIT_TENANT"), tenant);
}

TEST_F(GpulimitCli, NamesItselfAsTheJobsLeaderReplacingAnyInherited) {
  const CliRun run = gpulimit({"--mem", "1G", "--", "/bin/sh", "-c", "echo \"$$ $GPULIMIT_JOB_LEADER\""},
                              environment({"GPULIMIT_JOB_LEADER=1:1"}));
  ASSERT_TRUE(run.exited_with(0)) << run.describe();

  // The shell's pid is gpulimit's: gpulimit execs the command.
  std::istringstream words(run.out);
  std::string shell_pid;
  std::string leader;
  words >> shell_pid >> leader;
  ASSERT_NE(leader.find(':'), std::string::npos) << run.out;
  EXPECT_EQ(leader.substr(0, leader.find(':')), shell_pid) << run.out;
  EXPECT_NE(leader, "1:1");
}

TEST_F(GpulimitCli, KeepsATenantAlreadySet) {
  EXPECT_EQ(job_environment({"--mem", "1G"}, environment({"GPULIMIT_TENANT=train-42"}))
                .at("GPULIMIT_TENANT"),
            "train-42");
}

TEST_F(GpulimitCli, TheJobsExitStatusIsGpulimits) {
  const CliRun run = gpulimit({"--mem", "1G", "--", "/bin/sh", "-c", "exit 7"}, environment());
  EXPECT_TRUE(run.exited_with(7)) << run.describe();

  const CliRun without_separator = gpulimit({"--mem", "1G", "sh", "-c", "exit 3"}, environment());
  EXPECT_TRUE(without_separator.exited_with(3)) << without_separator.describe();
}

TEST_F(GpulimitCli, TheJobsSignalIsGpulimits) {
  const CliRun run =
      gpulimit({"--mem", "1G", "--", "/bin/sh", "-c", "kill -TERM $$"}, environment());
  EXPECT_TRUE(run.killed_by(SIGTERM)) << run.describe();
}

TEST_F(GpulimitCli, PassesTheCommandsArgumentsUntouched) {
  const CliRun run = gpulimit(
      {"--mem", "1G", "--", "/bin/sh", "-c", "printf '%s\\n' \"$@\"", "sh", "--mem", "", "--", "x"},
      environment());
  ASSERT_TRUE(run.exited_with(0)) << run.describe();
  EXPECT_EQ(run.out, "--mem\n\n--\nx\n");
}

TEST_F(GpulimitCli, RefusesMalformedSizes) {
  const std::string examples = " (examples: 10G, 512M, 50%)";
  expect_refused({"--mem", "10Q"}, environment(), "gpulimit: --mem 10Q: not a size" + examples);
  expect_refused({"--mem", "1.5G"}, environment(), "--mem 1.5G: not a size" + examples);
  expect_refused({"--mem", ""}, environment(), "--mem '': not a size" + examples);
  expect_refused({"--mem", "0"}, environment(), "--mem 0: zero is not a cap" + examples);
  expect_refused({"--mem", "-1G"}, environment(), "--mem");
  expect_refused({"--mem", "0%"}, environment(), "--mem 0%: not a percentage from 1% to 100%");
  expect_refused({"--mem", "101%"}, environment(), "--mem 101%: not a percentage from 1% to 100%");
  expect_refused({"--mem", "16777216T"}, environment(), "--mem 16777216T: too large for 64 bits");
}

TEST_F(GpulimitCli, RefusesMalformedDeviceLists) {
  const auto gpus = environment(simulated_gpus(2));
  expect_refused({"--device-mem", "0=1G,0=2G"}, gpus,
                 "--device-mem 0=1G,0=2G: device 0 is given twice");
  expect_refused(
      {"--device-mem", "64=1G"}, gpus,
      "--device-mem 64=1G: '64' is not a device index (0 to 63) or a GPU's UUID (GPU-...)");
  expect_refused({"--device-mem", "0=1G,"}, gpus, "--device-mem 0=1G,: an empty entry in the list");
  expect_refused({"--device-mem", "0"}, gpus, "--device-mem 0: '0' is not DEVICE=SIZE");
  expect_refused({"--device-mem", "1=0"}, gpus, "--device-mem 1=0: device 1: zero is not a cap");
  expect_refused({"--device-mem", "1=200%"}, gpus,
                 "--device-mem 1=200%: device 1: not a percentage from 1% to 100%");
}

TEST_F(GpulimitCli, RefusesAUuidOfNoGpuHere) {
  const std::string nowhere = "GPU-00000000-0000-0000-0000-00000000beef";
  expect_refused({"--device-mem", nowhere + "=1G"}, environment(simulated_gpus(2)),
                 "--device-mem " + nowhere + "=1G: no GPU " + nowhere + " on this machine");
}

TEST_F(GpulimitCli, RefusesMalformedComputeLimits) {
  const std::string percent = "not a percentage from 1 to 100 (examples: 30, 30%)";
  expect_refused({"--sm", "0"}, environment(), "gpulimit: --sm 0: zero is not a cap");
  expect_refused({"--sm", "0%"}, environment(), "--sm 0%: zero is not a cap");
  expect_refused({"--sm", "101"}, environment(), "--sm 101: " + percent);
  expect_refused({"--sm", "30%%"}, environment(), "--sm 30%%: " + percent);
  expect_refused({"--sm", "half"}, environment(), "--sm half: " + percent);
  expect_refused({"--weight", "0"}, environment(), "--weight 0: not a whole number from 1 to 1000");
  expect_refused({"--weight", "1001"}, environment(), "--weight 1001: not a whole number");
  expect_refused({"--weight", "2.5"}, environment(), "--weight 2.5: not a whole number");
  expect_refused({"--priority", "urgent"}, environment(),
                 "--priority urgent: not a priority (high, normal or low)");
  expect_refused({"--priority", "HIGH"}, environment(), "--priority HIGH: not a priority");
  expect_refused({"--sm"}, environment(), "--sm");
  expect_refused({"--sm", "30", "--sm", "30"}, environment(), "--sm is given twice");
  expect_refused({"--mem", "1G"}, environment({"GPULIMIT_SM=0"}),
                 "GPULIMIT_SM=0: zero is not a cap");
  expect_refused({"--mem", "1G"}, environment({"GPULIMIT_PRIORITY=top"}),
                 "GPULIMIT_PRIORITY=top: not a priority");
  expect_refused({"--sm", "30"}, environment({"CUDA_DEVICE_SM_LIMIT=50"}),
                 "--sm 30 and CUDA_DEVICE_SM_LIMIT=50 disagree");
  expect_refused({"--mem", "1G"}, environment({"CUDA_DEVICE_SM_LIMIT=lots"}),
                 "CUDA_DEVICE_SM_LIMIT=lots: not a percentage from 0 (no cap) to 100");
  expect_refused({"--mem", "1G"}, environment({"GPULIMIT_SOCKET=gpulimitd.sock"}),
                 "GPULIMIT_SOCKET=gpulimitd.sock: not an absolute path");
}

TEST_F(GpulimitCli, NoServerRefusesALimitOfGpuTime) {
  const std::string needs =
      ": a limit of GPU time needs gpulimitd, and --no-server runs without it";
  expect_refused({"--sm", "30"}, environment(), "gpulimit: --sm 30" + needs);
  expect_refused({"--weight", "1"}, environment(), "--weight 1" + needs);
  expect_refused({}, environment({"GPULIMIT_PRIORITY=high"}), "GPULIMIT_PRIORITY=high" + needs);
  expect_refused({}, environment({"CUDA_DEVICE_SM_LIMIT=40"}), "CUDA_DEVICE_SM_LIMIT=40" + needs);
}

TEST_F(GpulimitCli, NoServerGivesTheJobNoSocketAndSaysNothing) {
  const CliRun run =
      gpulimit({"--mem", "1G", "--", kPrintEnvironment},
               environment({"GPULIMIT_SOCKET=/run/elsewhere.sock", "CUDA_DEVICE_SM_LIMIT=0"}));
  ASSERT_TRUE(run.exited_with(0)) << run.describe();
  EXPECT_EQ(run.err, "");
  const Variables job = parse_environment(run.out);
  EXPECT_EQ(job.count("GPULIMIT_SOCKET"), 0u);
  EXPECT_EQ(job.count("GPULIMIT_SM"), 0u);
  EXPECT_EQ(job.at("CUDA_DEVICE_SM_LIMIT"), "0");  // HAMi's variables are kept
}

TEST_F(GpulimitCli, RefusesMalformedCommandLines) {
  expect_refused({"--memm", "1G"}, environment(), "unknown option --memm");
  expect_refused({"--mem", "1G", "--mem", "2G"}, environment(), "--mem is given twice");
  expect_refused({"--mem"}, environment(), "--mem");
  expect_refused({"--mem", "1G"}, environment(), "no command to run", false);
  expect_refused({"--mem", "1G", "--"}, environment(), "no command to run", false);
  expect_refused({}, environment(), "no command to run", false);
}

TEST_F(GpulimitCli, RefusesAnEnvironmentTheLibraryWouldRefuse) {
  expect_refused({}, environment({"GPULIMIT_MEM=junk"}), "GPULIMIT_MEM=junk: not a size");
  expect_refused({"--mem", "1G"}, environment({"GPULIMIT_TENANT=my job"}),
                 "GPULIMIT_TENANT=my job: not a tenant id");
  expect_refused({"--mem", "1G"}, environment({"GPULIMIT_LEDGER_DIR=ledgers"}),
                 "GPULIMIT_LEDGER_DIR=ledgers: not an absolute path");
  expect_refused({"--mem", "2G"}, environment({"CUDA_DEVICE_MEMORY_LIMIT=1g"}),
                 "--mem 2G and CUDA_DEVICE_MEMORY_LIMIT=1g disagree");
  expect_refused({}, environment({"GPULIMIT_MEM=2G", "CUDA_DEVICE_MEMORY_LIMIT=1g"}),
                 "GPULIMIT_MEM=2G and CUDA_DEVICE_MEMORY_LIMIT=1g disagree");
}

TEST_F(GpulimitCli, RefusesALibraryThatIsNotThere) {
  expect_refused({"--mem", "1G"},
                 without_library({"GPULIMIT_LIBRARY=" + dir_.path() + "/missing.so"}),
                 "GPULIMIT_LIBRARY=" + dir_.path() + "/missing.so: No such file or directory");
  expect_refused({"--mem", "1G"}, without_library({"GPULIMIT_LIBRARY=" + dir_.path()}),
                 "GPULIMIT_LIBRARY=" + dir_.path() + ": not a regular file");
}

TEST_F(GpulimitCli, RefusesDevicesTheJobDoesNotSee) {
  expect_refused({"--device-mem", "0=1G,2=1G"}, environment(simulated_gpus(2)),
                 "gpulimit: --device-mem 0=1G,2=1G: no device 2: the job sees 2 devices, 0 to 1");

  std::vector<std::string> masked = environment(simulated_gpus(2));
  masked.push_back("CUDA_VISIBLE_DEVICES=1");
  expect_refused({"--device-mem", "1=1G"}, masked,
                 "gpulimit: --device-mem 1=1G: no device 1: the job sees 1 device, 0 "
                 "(CUDA_VISIBLE_DEVICES=1)");

  std::vector<std::string> none = environment(simulated_gpus(2));
  none.push_back("CUDA_VISIBLE_DEVICES=");
  expect_refused({"--device-mem", "0=1G"}, none, "no device 0: the job sees no device");
}

TEST_F(GpulimitCli, AcceptsDevicesTheJobSees) {
  struct Case {
    std::string mask;
    std::string device_mem;
    std::string gpu;  // the GPU the index names under the mask
  };
  const Case cases[] = {
      {"1", "0=1G", kSimulatedGpu1},
      {"1,0", "1=1G", kSimulatedGpu0},
      {"1,7,0", "0=1G", kSimulatedGpu1},  // the first invalid entry ends the list
      {kSimulatedGpu1, "0=1G", kSimulatedGpu1},
      {"gpu-FA4EC0DA-0000-4000-8000-000000000001", "0=1G", kSimulatedGpu1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mask);
    std::vector<std::string> env = environment(simulated_gpus(2));
    env.push_back("CUDA_VISIBLE_DEVICES=" + c.mask);
    const Variables job = job_environment({"--device-mem", c.device_mem}, env);
    EXPECT_EQ(job.at("GPULIMIT_DEVICE_MEM"), c.gpu + "=1G");
    EXPECT_EQ(job.at("CUDA_VISIBLE_DEVICES"), c.mask);
  }
}

TEST_F(GpulimitCli, RefusesADeviceListWhenNvmlCannotCheckIt) {
  // A libnvidia-ml.so.1 without NVML in it, found first: deterministic on
  // machines with a real NVML too.
  const std::string broken = dir_.path() + "/broken-nvml";
  fs::create_directory(broken);
  fs::copy_file(kPreloadStandIn, broken + "/libnvidia-ml.so.1");
  const auto env = environment({"LD_LIBRARY_PATH=" + broken});
  expect_refused({"--device-mem", "0=1G"}, env,
                 "gpulimit: --device-mem 0=1G: cannot check the device indices: "
                 "libnvidia-ml.so.1 has no nvmlInit_v2");

  // Without --device-mem there is nothing to check.
  EXPECT_EQ(job_environment({"--mem", "1G"}, env).at("GPULIMIT_MEM"), "1G");
}

TEST_F(GpulimitCli, CommandNotFoundIs127) {
  for (const std::string& command :
       std::vector<std::string>{"gpulimit-no-such-command", dir_.path() + "/none"}) {
    const CliRun run = gpulimit({"--mem", "1G", "--", command}, environment());
    EXPECT_TRUE(run.exited_with(127)) << run.describe();
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_TRUE(run.err.starts_with("gpulimit: " + command + ": ")) << run.err;
  }
  const CliRun bare = gpulimit({"--", "gpulimit-no-such-command"}, environment());
  EXPECT_EQ(bare.err, "gpulimit: gpulimit-no-such-command: command not found\n");
}

TEST_F(GpulimitCli, CommandThatCannotRunIs126) {
  const std::string script = dir_.path() + "/not-executable";
  { std::ofstream(script) << "#!/bin/sh\ntouch " << marker_ << "\n"; }
  fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write);
  for (const std::string& command : std::vector<std::string>{script, dir_.path()}) {
    const CliRun run = gpulimit({"--mem", "1G", "--", command}, environment());
    EXPECT_TRUE(run.exited_with(126)) << run.describe();
    EXPECT_EQ(run.err, "gpulimit: " + command + ": Permission denied\n");
  }
  EXPECT_FALSE(fs::exists(marker_));
}

TEST_F(GpulimitCli, FindsTheLibraryOfAnInstall) {
  // <prefix>/bin/gpulimit and <prefix>/lib/libgpulimit.so.
  const std::string prefix = dir_.path() + "/prefix";
  fs::create_directories(prefix + "/bin");
  fs::create_directories(prefix + "/lib");
  fs::copy_file(kGpulimit, prefix + "/bin/gpulimit");
  fs::permissions(prefix + "/bin/gpulimit", fs::perms::owner_all);
  fs::copy_file(kPreloadStandIn, prefix + "/lib/libgpulimit.so");

  const CliRun run =
      run_program(prefix + "/bin/gpulimit", {"--no-server", "--mem", "1G", "--", kPrintEnvironment},
                  without_library(), dir_.path());
  ASSERT_TRUE(run.exited_with(0)) << run.describe();
  EXPECT_EQ(parse_environment(run.out).at("LD_PRELOAD"), canonical(prefix + "/lib/libgpulimit.so"));

  // An install never falls back on a build tree.
  fs::remove(prefix + "/lib/libgpulimit.so");
  const CliRun missing =
      run_program(prefix + "/bin/gpulimit", {"--no-server", "--mem", "1G", "--", "true"},
                  without_library(), dir_.path());
  EXPECT_TRUE(missing.exited_with(2)) << missing.describe();
  EXPECT_EQ(missing.err, "gpulimit: cannot find libgpulimit.so (looked for " + canonical(prefix) +
                             "/lib/libgpulimit.so); set GPULIMIT_LIBRARY to "
                             "its path\n");
}

TEST_F(GpulimitCli, TheBuildTreesGpulimitTakesTheBuildTreesLibrary) {
  const CliRun run = gpulimit({"--mem", "1G", "--", kPrintEnvironment}, without_library());
  if (fs::exists(kBuildTreeLibrary)) {
    ASSERT_TRUE(run.exited_with(0)) << run.describe();
    EXPECT_EQ(parse_environment(run.out).at("LD_PRELOAD"), canonical(kBuildTreeLibrary));
  } else {
    EXPECT_TRUE(run.exited_with(2)) << run.describe();
    EXPECT_NE(run.err.find("cannot find libgpulimit.so"), std::string::npos) << run.err;
  }
}

TEST_F(GpulimitCli, HelpAndVersionRunNothing) {
  const CliRun help =
      gpulimit({"--help", "--", "/bin/sh", "-c", "touch " + marker_}, environment());
  EXPECT_TRUE(help.exited_with(0)) << help.describe();
  EXPECT_EQ(help.err, "");
  for (const char* section : {"SYNOPSIS",
                              "DESCRIPTION",
                              "OPTIONS",
                              "EXIT STATUS",
                              "ENVIRONMENT",
                              "EXAMPLES",
                              "--mem SIZE",
                              "--device-mem LIST",
                              "GPULIMIT_TENANT",
                              "CUDA_DEVICE_MEMORY_LIMIT_<INDEX>",
                              "tenant",
                              "--sm PERCENT",
                              "--weight WEIGHT",
                              "--priority PRIORITY",
                              "--no-server",
                              "gpulimit status [--json]",
                              "CUDA_DEVICE_SM_LIMIT",
                              "GPULIMIT_SOCKET",
                              "GPULIMIT_SERVER",
                              "Time-slicing"})
    EXPECT_NE(help.out.find(section), std::string::npos) << section;

  const CliRun version = gpulimit({"--version"}, environment());
  EXPECT_TRUE(version.exited_with(0)) << version.describe();
  EXPECT_EQ(version.out, "gpulimit " GPULIMIT_VERSION "\n");
  EXPECT_FALSE(fs::exists(marker_));
}

TEST_F(GpulimitCli, RemovesLedgersOfEndedTenantsAndKeepsLiveOnes) {
  // A tenant whose processes all died (no chance to clean up), and one
  // still running (this test process).
  const std::string ledgers = dir_.path() + "/ledgers";
  fs::create_directory(ledgers);
  const pid_t child = fork();
  if (child == 0) {
    std::string error;
    auto ended = gpulimit::shm::TenantLedger::open(ledgers, "ended", error);
    _exit(ended ? 0 : 1);  // dies attached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string error;
  auto live = gpulimit::shm::TenantLedger::open(ledgers, "running", error);
  ASSERT_NE(live, nullptr) << error;
  const std::string ended_path = gpulimit::shm::TenantLedger::path_for(ledgers, getuid(), "ended");
  ASSERT_TRUE(fs::exists(ended_path));

  const CliRun run =
      gpulimit({"--mem", "1G", "--", "/bin/true"}, environment({"GPULIMIT_LEDGER_DIR=" + ledgers}));

  EXPECT_TRUE(run.exited_with(0)) << run.describe();
  EXPECT_FALSE(fs::exists(ended_path));
  EXPECT_TRUE(fs::exists(live->path()));
}

}  // namespace
}  // namespace integration
