// How the workloads fail: a wrong command line, a driver that lacks functions,
// the toolkit's stub driver. Each ends with a distinct status and one line on
// stderr, never a crash. None of this needs the simulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <tuple>

#include "simulated_machine.h"
#include "test_parameters.h"

namespace integration {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

size_t line_count(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Usage errors are found before the driver is touched, so any libcuda.so.1
// that loads will do; the partial driver is always built.
const Environment kAnyDriver = {{"LD_LIBRARY_PATH", PARTIAL_DRIVER_DIR}};

class UsageErrorTest
    : public testing::TestWithParam<std::tuple<std::string, std::vector<std::string>>> {};

TEST_P(UsageErrorTest, ExitsWithUsageStatusAndOneLine) {
  const auto& [program, args] = GetParam();

  const WorkloadRun sut = run_workload(program, args, kAnyDriver);

  EXPECT_EQ(sut.exit_status, kExitUsage) << sut.describe();
  EXPECT_EQ(line_count(sut.err), 1u) << sut.err;
  EXPECT_TRUE(sut.out.empty()) << sut.out;
}

INSTANTIATE_TEST_SUITE_P(
    Workloads, UsageErrorTest,
    testing::Values(std::make_tuple(kAllocator, std::vector<std::string>{"--path", "heap"}),
                    std::make_tuple(kAllocator, std::vector<std::string>{"--target", "1.5G"}),
                    std::make_tuple(kAllocator, std::vector<std::string>{"--chunk", "3M"}),
                    std::make_tuple(kAllocator, std::vector<std::string>{"--chunk", "0"}),
                    std::make_tuple(kAllocator, std::vector<std::string>{"--access", "ioctl"}),
                    std::make_tuple(kAllocator, std::vector<std::string>{"--stream-mode", "ptsz"}),
                    std::make_tuple(kAllocator, std::vector<std::string>{"--unknown"}),
                    std::make_tuple(kSpinner, std::vector<std::string>{"--launch", "kernel-ex-ex"}),
                    std::make_tuple(kSpinner, std::vector<std::string>{"--streams", "0"}),
                    std::make_tuple(kSpinner,
                                    std::vector<std::string>{"--seconds", "1", "--kernels", "2"}),
                    std::make_tuple(kSpinner, std::vector<std::string>{"--kernels", "-1"})));

TEST(WorkloadHelpTest, HelpExitsZeroAndNamesEveryPath) {
  for (const std::string& program : {kAllocator, kSpinner}) {
    const WorkloadRun sut = run_workload(program, {"--help"}, kAnyDriver);

    EXPECT_EQ(sut.exit_status, 0) << sut.describe();
    for (const std::string& access : kAccessPaths)
      EXPECT_NE(sut.out.find(access), std::string::npos);
    for (const std::string& mode : kStreamModes)
      EXPECT_NE(sut.out.find(mode), std::string::npos);
  }
  const std::string allocator_help = run_workload(kAllocator, {"--help"}, kAnyDriver).out;
  for (const std::string& path : kAllocationPaths)
    EXPECT_NE(allocator_help.find(path), std::string::npos) << path;
  const std::string spinner_help = run_workload(kSpinner, {"--help"}, kAnyDriver).out;
  for (const std::string& launch : kLaunchPaths)
    EXPECT_NE(spinner_help.find(launch), std::string::npos) << launch;
}

// The partial driver has cuInit, cuGetErrorName and cuGetProcAddress only.
// Whatever the path, the first function it lacks is cuDriverGetVersion.
class MissingFunctionTest
    : public testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {};

TEST_P(MissingFunctionTest, NamesTheFirstMissingFunction) {
  const auto& [program, access, stream_mode] = GetParam();

  const WorkloadRun sut =
      run_workload(program, {"--access", access, "--stream-mode", stream_mode}, kAnyDriver);

  EXPECT_EQ(sut.exit_status, kExitFailure) << sut.describe();
  EXPECT_EQ(line_count(sut.err), 1u) << sut.err;
  EXPECT_NE(sut.err.find("cuDriverGetVersion"), std::string::npos) << sut.err;
  EXPECT_NE(sut.err.find("more functions missing"), std::string::npos) << sut.err;
  EXPECT_NE(sut.err.find("--access " + access), std::string::npos) << sut.err;
  EXPECT_TRUE(sut.out.empty()) << sut.out;
}

INSTANTIATE_TEST_SUITE_P(
    EveryPath, MissingFunctionTest,
    testing::Combine(testing::Values(kAllocator, kSpinner), testing::ValuesIn(kAccessPaths),
                     testing::ValuesIn(kStreamModes)),
    [](const auto& test) {
      const std::string program = std::filesystem::path(std::get<0>(test.param)).filename();
      return test_name(program + "_" + std::get<1>(test.param) + "_" + std::get<2>(test.param));
    });

// The toolkit's stub libcuda.so exports everything and fails every call with
// CUDA_ERROR_STUB_LIBRARY: what a program meets when the stub directory
// shadows the driver.
class StubDriverTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::filesystem::create_symlink(CUDA_STUB_LIBRARY, directory_.path() + "/libcuda.so.1");
  }

  TemporaryDirectory directory_;
};

TEST_P(StubDriverTest, ReportsTheStubByName) {
  const std::string& access = GetParam();

  const WorkloadRun sut =
      run_workload(kAllocator, {"--access", access}, {{"LD_LIBRARY_PATH", directory_.path()}});

  EXPECT_EQ(sut.exit_status, kExitFailure) << sut.describe();
  EXPECT_EQ(line_count(sut.err), 1u) << sut.err;
  EXPECT_NE(sut.err.find("CUDA_ERROR_STUB_LIBRARY"), std::string::npos) << sut.err;
}

// The stub's cuGetProcAddress fails too, so only the exported-name paths get
// as far as cuInit.
INSTANTIATE_TEST_SUITE_P(AccessPaths, StubDriverTest, testing::ValuesIn(kAccessPaths),
                         [](const auto& test) { return test_name(test.param); });

}  // namespace
}  // namespace integration
