// The CUPTI tracer end to end, on the simulated driver and the simulated
// CUPTI (tests/fakecuda/cupti): workloads run under gpulimit-cupti-trace,
// and the tracer's trace must hold exactly the kernels the simulator's own
// trace holds, process by process, with the same devices, streams, names and
// durations, and start times off by one constant per process (the error of
// relating CUPTI's clock to CLOCK_MONOTONIC), at most kClockTolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/testing/simulated_machine.h"
#include "gpulimit/trace/trace.h"
#include "workload_process.h"

namespace integration {
namespace {

using gpulimit::trace::KernelRecord;
using gpulimit::trace::Trace;
using namespace std::chrono_literals;

const std::string kWrapper = CUPTI_TRACE_WRAPPER_PATH;
const std::string kTracerLibrary = CUPTI_TRACE_LIBRARY_PATH;
const std::string kSpinner = WORKLOAD_SPINNER_PATH;
const std::string kForkingSpinner = FORKING_SPINNER_PATH;

// Calibration brackets CUPTI's clock between two CLOCK_MONOTONIC reads; the
// narrowest of its samples is microseconds wide even on a loaded machine.
// A millisecond is far above that and far below a wrong clock (the
// simulated CUPTI's clock is CLOCK_REALTIME, decades away).
constexpr int64_t kClockTolerance_ns = 1'000'000;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Trace load_trace(const std::string& path) {
  gpulimit::trace::ParseResult parsed = gpulimit::trace::load(path);
  EXPECT_TRUE(parsed.ok()) << parsed.error().message() << "\n" << read_file(path);
  return parsed.ok() ? *std::move(parsed) : Trace{};
}

std::map<pid_t, std::vector<KernelRecord>> by_pid(const Trace& trace) {
  std::map<pid_t, std::vector<KernelRecord>> kernels;
  for (const KernelRecord& kernel : trace.kernels)
    kernels[kernel.pid].push_back(kernel);
  return kernels;
}

std::string describe(const KernelRecord& k) {
  std::ostringstream text;
  text << k.pid << " " << k.device << " " << k.stream << " " << k.start_ns << " " << k.end_ns << " "
       << k.name;
  return text.str();
}

// The tracer's trace holds what the simulator's does (see the top).
void expect_same_kernels(const Trace& simulator, const Trace& tracer) {
  const auto expected = by_pid(simulator);
  const auto actual = by_pid(tracer);
  ASSERT_FALSE(expected.empty()) << "the simulator ran no kernel";
  ASSERT_EQ(actual.size(), expected.size()) << "processes in the tracer's trace";
  for (const auto& [pid, kernels] : expected) {
    SCOPED_TRACE("pid " + std::to_string(pid));
    ASSERT_TRUE(actual.contains(pid));
    const std::vector<KernelRecord>& traced = actual.at(pid);
    ASSERT_EQ(traced.size(), kernels.size());
    const int64_t shift = traced.front().start_ns - kernels.front().start_ns;
    EXPECT_LE(std::abs(shift), kClockTolerance_ns);
    for (size_t i = 0; i < kernels.size(); ++i) {
      SCOPED_TRACE("simulator: " + describe(kernels[i]) + "\ntracer:    " + describe(traced[i]));
      EXPECT_EQ(traced[i].device, kernels[i].device);
      EXPECT_EQ(traced[i].stream, kernels[i].stream);
      EXPECT_EQ(traced[i].name, kernels[i].name);
      EXPECT_EQ(traced[i].start_ns - kernels[i].start_ns, shift);
      EXPECT_EQ(traced[i].duration_ns(), kernels[i].duration_ns());
    }
  }
}

class CuptiTrace : public testing::Test {
 protected:
  std::string simulator_trace() const { return machine_.trace_path(); }
  std::string tracer_trace() const { return directory_.path() + "/cupti.trace"; }

  // A simulated machine of this test's own, with the simulated CUPTI.
  Environment machine(int devices = 1) const {
    Environment environment =
        with(machine_.environment(), "FAKECUDA_DEVICES", std::to_string(devices));
    // In a sanitized build the preloaded library precedes the runtime.
    return with(environment, "ASAN_OPTIONS", "verify_asan_link_order=0");
  }

  // `program args` under gpulimit-cupti-trace -o tracer_trace().
  WorkloadRun traced(const std::string& program, const std::vector<std::string>& args,
                     const Environment& environment, bool append = false) const {
    return run_workload(kWrapper, wrapped(program, args, append), environment);
  }

  std::vector<std::string> wrapped(const std::string& program, const std::vector<std::string>& args,
                                   bool append) const {
    std::vector<std::string> command = {"-o", tracer_trace()};
    if (append) command.push_back("--append");
    command.push_back("--");
    command.push_back(program);
    command.insert(command.end(), args.begin(), args.end());
    return command;
  }

  TemporaryDirectory directory_;
  gpulimit::testing::SimulatedMachine machine_{"1G"};
};

// How CUPTI's timestamps reach CLOCK_MONOTONIC: CUPTI calls the tracer's
// clock (CUDA 12.? and later), or the tracer calibrates against CUPTI's own.
class CuptiTraceClocks : public CuptiTrace, public testing::WithParamInterface<std::string> {};

TEST_P(CuptiTraceClocks, RecordsExactlyWhatTheSimulatorRan) {
  // Arrange
  const Environment environment = with(machine(), "FAKECUDA_CUPTI_TIMESTAMP_CALLBACK", GetParam());

  // Act
  const WorkloadRun run =
      traced(kSpinner, {"--kernels", "40", "--kernel-ns", "200000", "--streams", "2"}, environment);

  // Assert
  ASSERT_EQ(run.exit_status, 0) << run.describe();
  EXPECT_EQ(run.err, "") << "the tracer has nothing to say when all goes well";
  const Trace simulator = load_trace(simulator_trace());
  EXPECT_EQ(simulator.kernels.size(), 40u);
  expect_same_kernels(simulator, load_trace(tracer_trace()));
}

INSTANTIATE_TEST_SUITE_P(Clocks, CuptiTraceClocks, testing::Values("callback", "unsupported"),
                         [](const auto& param_info) {
                           return param_info.param == "callback" ? "TimestampCallback"
                                                                 : "Calibrated";
                         });

TEST_F(CuptiTrace, WritesPhysicalDeviceIndices) {
  // Arrange: the process sees physical device 2 as its device 0
  const Environment environment = with(machine(3), "CUDA_VISIBLE_DEVICES", "2");

  // Act
  const WorkloadRun run =
      traced(kSpinner, {"--kernels", "5", "--kernel-ns", "100000"}, environment);

  // Assert
  ASSERT_EQ(run.exit_status, 0) << run.describe();
  const Trace tracer = load_trace(tracer_trace());
  ASSERT_EQ(tracer.kernels.size(), 5u);
  for (const KernelRecord& kernel : tracer.kernels)
    EXPECT_EQ(kernel.device, 2);
  expect_same_kernels(load_trace(simulator_trace()), tracer);
}

TEST_F(CuptiTrace, ProcessesSharingAFileWriteWholeLines) {
  // Arrange: three processes writing one file every millisecond
  const Environment environment = with(machine(), "GPULIMIT_CUPTI_TRACE_FLUSH_MS", "1");
  const std::vector<std::string> args = {"--kernels", "150",       "--kernel-ns",
                                         "20000",     "--streams", "2"};

  // Act
  std::vector<std::unique_ptr<WorkloadProcess>> processes;
  for (int i = 0; i < 3; ++i)
    processes.push_back(std::make_unique<WorkloadProcess>(
        kWrapper, wrapped(kSpinner, args, /*append=*/true), environment));
  for (auto& process : processes) {
    const WorkloadRun run = process->wait(60s);
    ASSERT_EQ(run.exit_status, 0) << run.describe();
  }

  // Assert: every line parses (load_trace), and the lines are those of the
  // simulator's trace
  const Trace tracer = load_trace(tracer_trace());
  EXPECT_EQ(tracer.kernels.size(), 3u * 150u);
  EXPECT_EQ(by_pid(tracer).size(), 3u);
  expect_same_kernels(load_trace(simulator_trace()), tracer);
}

TEST_F(CuptiTrace, AForkedChildWritesItsKernelsUnderItsOwnPid) {
  // Arrange
  const Environment environment = machine();

  // Act
  const WorkloadRun run =
      traced(kForkingSpinner, {"--kernels", "6", "--kernel-ns", "100000"}, environment);

  // Assert
  ASSERT_EQ(run.exit_status, 0) << run.describe();
  const auto tracer = by_pid(load_trace(tracer_trace()));
  const pid_t parent = static_cast<pid_t>(run.report.number("parent_pid"));
  const pid_t child = static_cast<pid_t>(run.report.number("child_pid"));
  ASSERT_TRUE(tracer.contains(parent));
  ASSERT_TRUE(tracer.contains(child));
  EXPECT_EQ(tracer.at(parent).size(), 6u);
  EXPECT_EQ(tracer.at(child).size(), 6u);
  expect_same_kernels(load_trace(simulator_trace()), load_trace(tracer_trace()));
}

TEST_F(CuptiTrace, ARunningProcessWritesItsKernelsBeforeItExits) {
  // Arrange: a process that would run for a minute
  const Environment environment = with(machine(), "GPULIMIT_CUPTI_TRACE_FLUSH_MS", "20");
  WorkloadProcess process(kWrapper,
                          wrapped(kSpinner, {"--seconds", "60", "--kernel-ns", "100000"}, false),
                          environment);
  ASSERT_TRUE(process.started());

  // Act: wait for the periodic flush to write something
  bool written = false;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!written && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    for (const KernelRecord& kernel : load_trace(tracer_trace()).kernels)
      written |= kernel.pid == process.pid();
  }
  process.kill_now();

  // Assert
  EXPECT_TRUE(written) << "no kernel of the running process in the trace after 30 s";
}

TEST_F(CuptiTrace, TheLibraryWithoutATraceFileSaysSoAndChangesNothing) {
  // Arrange
  const Environment environment = with(machine(), "LD_PRELOAD", kTracerLibrary);

  // Act
  const WorkloadRun run = run_workload(kSpinner, {"--kernels", "2"}, environment);

  // Assert
  ASSERT_EQ(run.exit_status, 0) << run.describe();
  EXPECT_NE(run.err.find("GPULIMIT_CUPTI_TRACE_FILE is not set; not tracing"), std::string::npos)
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST_F(CuptiTrace, AnUnwritableTraceFileIsSaidOnceAndTheProgramRuns) {
  // Arrange
  Environment environment = with(machine(), "LD_PRELOAD", kTracerLibrary);
  environment = with(environment, "GPULIMIT_CUPTI_TRACE_FILE", directory_.path() + "/none/t");

  // Act
  const WorkloadRun run = run_workload(kSpinner, {"--kernels", "2"}, environment);

  // Assert
  ASSERT_EQ(run.exit_status, 0) << run.describe();
  EXPECT_NE(run.err.find("cannot open " + directory_.path() + "/none/t"), std::string::npos)
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST_F(CuptiTrace, ABadFlushPeriodIsSaidOnceAndTheDefaultTaken) {
  // Arrange
  const Environment environment = with(machine(), "GPULIMIT_CUPTI_TRACE_FLUSH_MS", "soon");

  // Act
  const WorkloadRun run = traced(kSpinner, {"--kernels", "3"}, environment);

  // Assert: said, and still traced
  ASSERT_EQ(run.exit_status, 0) << run.describe();
  EXPECT_NE(run.err.find("GPULIMIT_CUPTI_TRACE_FLUSH_MS=soon is not a number of milliseconds"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  expect_same_kernels(load_trace(simulator_trace()), load_trace(tracer_trace()));
}

TEST_F(CuptiTrace, TheCommandKeepsWhatIsPreloadedAndNamesTheFileAbsolutely) {
  // Arrange: something preloaded already, and a relative trace file
  const std::string other = std::string(FAKECUDA_LIB_DIR) + "/libnvidia-ml.so.1";
  const Environment environment = with(machine(), "LD_PRELOAD", other);

  // Act: env prints the environment the command gets
  const WorkloadRun run =
      run_workload(kWrapper, {"-o", "relative.trace", "--", "env"}, environment);

  // Assert
  ASSERT_EQ(run.exit_status, 0) << run.describe();
  EXPECT_NE(run.out.find("\nLD_PRELOAD=" + other + ":" + kTracerLibrary + "\n"), std::string::npos)
      << run.out;
  const std::string absolute = std::filesystem::current_path().string() + "/relative.trace";
  EXPECT_NE(run.out.find("\nGPULIMIT_CUPTI_TRACE_FILE=" + absolute + "\n"), std::string::npos)
      << run.out;
  std::filesystem::remove(absolute);
}

TEST_F(CuptiTrace, BadCommandLinesLeaveTheTraceFileAlone) {
  // Arrange
  { std::ofstream(tracer_trace()) << "kept\n"; }
  const Environment environment = machine();

  // Act
  const WorkloadRun no_command = run_workload(kWrapper, {"-o", tracer_trace()}, environment);
  const WorkloadRun missing = run_workload(
      kWrapper, {"-o", tracer_trace(), "--", directory_.path() + "/nothing"}, environment);
  const WorkloadRun unknown =
      run_workload(kWrapper, {"--bogus", "-o", tracer_trace(), "true"}, environment);

  // Assert
  EXPECT_EQ(no_command.exit_status, 2) << no_command.describe();
  EXPECT_NE(no_command.err.find("no command to run"), std::string::npos) << no_command.err;
  EXPECT_EQ(missing.exit_status, 127) << missing.describe();
  EXPECT_NE(missing.err.find("no such file"), std::string::npos) << missing.err;
  EXPECT_EQ(unknown.exit_status, 2) << unknown.describe();
  EXPECT_NE(unknown.err.find("unknown option --bogus"), std::string::npos) << unknown.err;
  EXPECT_EQ(read_file(tracer_trace()), "kept\n");
}

}  // namespace
}  // namespace integration
