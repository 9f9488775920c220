// The spinner on the simulated driver: every launch path through every access
// path and stream mode runs the kernels it reports, and its event-measured GPU
// time is what those kernels take. Bounds on time are loose above: the test
// machine may be small and busy.
#include <gtest/gtest.h>

#include <numeric>
#include <tuple>

#include "simulated_machine.h"
#include "test_parameters.h"

namespace integration {
namespace {

constexpr uint64_t kMillisecond = 1'000'000;

// Spin kernels executed by the simulator, and checks on each.
size_t traced_spin_kernels(const SimulatedMachine& machine, uint64_t kernel_ns) {
  size_t count = 0;
  for (const TracedKernel& kernel : machine.traced_kernels()) {
    if (kernel.name.rfind("spin", 0) != 0) continue;
    EXPECT_EQ(kernel.end_ns - kernel.start_ns, kernel_ns);
    ++count;
  }
  return count;
}

// GPU time of `kernels` kernels of `kernel_ns`, as `streams` streams' events
// measure it: at least the kernels' own time; at most, with all kernels
// serialised on one timeline (the simulator's model), every stream's span
// covering all of them, plus scheduling noise.
void expect_gpu_time(const Report& report, uint64_t kernels, uint64_t kernel_ns, uint64_t streams) {
  const uint64_t kernel_time = kernels * kernel_ns;
  const uint64_t gpu_ns = report.number("gpu_ns");
  EXPECT_GE(gpu_ns, kernel_time - kernel_time / 100) << "gpu_ns below the kernels' own time";
  EXPECT_LE(gpu_ns, streams * (2 * kernel_time + 500 * kMillisecond));
  const std::vector<uint64_t> per_stream = report.numbers("stream_gpu_ns");
  EXPECT_EQ(per_stream.size(), streams);
  EXPECT_EQ(std::accumulate(per_stream.begin(), per_stream.end(), uint64_t{0}), gpu_ns);
}

class SpinnerPathTest
    : public testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {
 protected:
  const std::string& launch() const { return std::get<0>(GetParam()); }
  const std::string& access() const { return std::get<1>(GetParam()); }
  const std::string& stream_mode() const { return std::get<2>(GetParam()); }
  bool is_graph() const { return launch().rfind("graph", 0) == 0; }

  SimulatedMachine machine_;
};

// 16 kernels of 2 ms on 2 streams, 4 at a time: 4 kernels per turn, or one
// graph of 4.
TEST_P(SpinnerPathTest, RunsEveryKernelForItsDuration) {
  const uint64_t kernel_ns = 2 * kMillisecond;

  const WorkloadRun sut = run_workload(
      kSpinner,
      {"--launch", launch(), "--access", access(), "--stream-mode", stream_mode(), "--kernels",
       "16", "--batch", "4", "--streams", "2", "--kernel-ns", std::to_string(kernel_ns)},
      machine_.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  EXPECT_EQ(report.text("workload"), "spinner");
  EXPECT_EQ(report.text("launch"), launch());
  EXPECT_EQ(report.text("access"), access());
  EXPECT_EQ(report.text("stream_mode"), stream_mode());
  EXPECT_EQ(report.number("kernels"), 16u);
  EXPECT_EQ(report.number("launches"), is_graph() ? 4u : 16u);
  EXPECT_EQ(report.numbers("stream_kernels"), (std::vector<uint64_t>{8, 8}));
  expect_gpu_time(report, 16, kernel_ns, 2);
  EXPECT_EQ(traced_spin_kernels(machine_, kernel_ns), 16u);
}

INSTANTIATE_TEST_SUITE_P(EveryPath, SpinnerPathTest,
                         testing::Combine(testing::ValuesIn(kLaunchPaths),
                                          testing::ValuesIn(kAccessPaths),
                                          testing::ValuesIn(kStreamModes)),
                         PathNamer());

class SpinnerGraphTest : public testing::TestWithParam<std::string> {
 protected:
  SimulatedMachine machine_;
};

// One cuGraphLaunch runs all of a graph's kernels.
TEST_P(SpinnerGraphTest, EachGraphLaunchRunsAllItsKernels) {
  const uint64_t kernel_ns = 1 * kMillisecond;

  const WorkloadRun sut = run_workload(kSpinner,
                                       {"--launch", GetParam(), "--batch", "8", "--kernels", "64",
                                        "--kernel-ns", std::to_string(kernel_ns)},
                                       machine_.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  EXPECT_EQ(sut.report.number("launches"), 8u);
  EXPECT_EQ(sut.report.number("kernels"), 64u);
  expect_gpu_time(sut.report, 64, kernel_ns, 1);
  EXPECT_EQ(traced_spin_kernels(machine_, kernel_ns), 64u);
}

INSTANTIATE_TEST_SUITE_P(Graphs, SpinnerGraphTest,
                         testing::Values("graph-capture", "graph-explicit"),
                         [](const auto& test) { return test_name(test.param); });

// A kernel count that is not a multiple of the graph size runs whole graphs.
TEST(SpinnerTest, GraphCountRoundsUpToWholeGraphs) {
  SimulatedMachine machine;

  const WorkloadRun sut = run_workload(
      kSpinner,
      {"--launch", "graph-explicit", "--batch", "4", "--kernels", "10", "--kernel-ns", "100000"},
      machine.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  EXPECT_EQ(sut.report.number("launches"), 3u);
  EXPECT_EQ(sut.report.number("kernels"), 12u);
}

TEST(SpinnerTest, SecondsBoundsTheRunAndEveryLaunchedKernelIsTimed) {
  SimulatedMachine machine;
  const uint64_t kernel_ns = 5 * kMillisecond;

  const WorkloadRun sut =
      run_workload(kSpinner, {"--seconds", "0.3", "--kernel-ns", std::to_string(kernel_ns)},
                   machine.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const uint64_t kernels = sut.report.number("kernels");
  EXPECT_GE(kernels, 1u);
  EXPECT_GE(sut.report.number("wall_ns"), 300 * kMillisecond);
  // At most two rounds are queued when time is up.
  EXPECT_LE(sut.report.number("wall_ns"),
            300 * kMillisecond + 2 * kernel_ns + 2'000 * kMillisecond);
  expect_gpu_time(sut.report, kernels, kernel_ns, 1);
  EXPECT_EQ(traced_spin_kernels(machine, kernel_ns), kernels);
}

// Drivers before 12.8 lack cuEventElapsedTime_v2; the workloads then time with
// the first variant. A 12.4 driver answers a request for the 12.8 variant
// with CUDA_ERROR_INVALID_VALUE.
class SpinnerOlderDriverTest : public testing::TestWithParam<std::string> {
 protected:
  SimulatedMachine machine_;
};

TEST_P(SpinnerOlderDriverTest, TimesWithTheFirstEventElapsedTime) {
  Environment environment = machine_.environment();
  environment.emplace_back("FAKECUDA_DRIVER_VERSION", "12040");

  const WorkloadRun sut = run_workload(
      kSpinner, {"--access", GetParam(), "--kernels", "4", "--kernel-ns", "1000000"}, environment);

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  expect_gpu_time(sut.report, 4, kMillisecond, 1);
}

INSTANTIATE_TEST_SUITE_P(AccessPaths, SpinnerOlderDriverTest, testing::ValuesIn(kAccessPaths),
                         [](const auto& test) { return test_name(test.param); });

}  // namespace
}  // namespace integration
