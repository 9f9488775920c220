// The context a tenant's process creates counts toward the cap, whichever way
// the process reaches the driver: on a simulated GPU whose contexts take
// 256 MiB, the allocator under a 1 GiB cap finds 768 MiB left by its primary
// context, fills exactly that, and every process of the tenant pays for its
// own context while it lives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "simulated_machine.h"
#include "test_parameters.h"
#include "workload_process.h"

namespace integration {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kContext = 256 * kMiB;

class ContextCap : public testing::Test {
 protected:
  Environment tenant() const {
    return machine_.tenant_environment(ledgers_.path(), "1G", "context-cap");
  }

  SimulatedMachine machine_{"4G", "256M"};
  TemporaryDirectory ledgers_;
};

class ContextCapAccess : public ContextCap, public testing::WithParamInterface<std::string> {};

TEST_P(ContextCapAccess, ThePrimaryContextTakesItsShareOfTheCap) {
  const WorkloadRun sut = run_workload(
      kAllocator,
      {"--path", "linear", "--target", "3G", "--chunk", "64M", "--retry", "--access", GetParam()},
      tenant());
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  EXPECT_EQ(report.number("total"), kGiB) << "the cap is still the device's size";
  EXPECT_EQ(report.number("free_before"), kGiB - kContext) << "less the context";
  EXPECT_EQ(report.text("error"), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(report.number("bytes"), kGiB - kContext) << "12 chunks of 64M fill the rest";
  EXPECT_EQ(report.number("free_after_alloc"), 0u);
  EXPECT_EQ(report.number("free_after_free"), kGiB - kContext);
  EXPECT_EQ(report.number("retry_bytes"), kGiB - kContext);
}

INSTANTIATE_TEST_SUITE_P(EveryAccessPath, ContextCapAccess, testing::ValuesIn(kAccessPaths),
                         [](const testing::TestParamInfo<std::string>& param) {
                           return test_name(param.param);
                         });

TEST_F(ContextCap, WithoutNvmlTheContextIsChargedByTheDriversAccount) {
  // A machine where libnvidia-ml.so.1 cannot be loaded: the driver alone.
  TemporaryDirectory driver_only;
  ASSERT_EQ(symlink((std::string(FAKECUDA_LIB_DIR) + "/libcuda.so.1").c_str(),
                    (driver_only.path() + "/libcuda.so.1").c_str()),
            0);
  const WorkloadRun sut =
      run_workload(kAllocator, {"--path", "linear", "--target", "3G", "--chunk", "64M"},
                   with(tenant(), "LD_LIBRARY_PATH", driver_only.path()));
  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  EXPECT_NE(sut.err.find("gpulimit: NVML (libnvidia-ml.so.1) cannot be loaded"), std::string::npos)
      << sut.describe();
  EXPECT_EQ(sut.report.text("error"), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(sut.report.number("bytes"), kGiB - kContext) << "the context is charged all the same\n"
                                                         << sut.describe();
}

TEST_F(ContextCap, EveryProcessPaysForItsOwnContextWhileItLives) {
  WorkloadProcess holder(
      kAllocator, {"--path", "linear", "--target", "256M", "--chunk", "256M", "--hold", "60"},
      tenant());
  ASSERT_TRUE(holder.wait_for_output("event=holding", 30s));
  const WorkloadRun second =
      run_workload(kAllocator, {"--path", "linear", "--target", "1G", "--chunk", "64M"}, tenant());
  ASSERT_EQ(second.exit_status, 0) << second.describe();
  EXPECT_EQ(second.report.number("free_before"), kGiB - 2 * kContext - 256 * kMiB)
      << "two contexts and the holder's 256M";
  EXPECT_EQ(second.report.number("bytes"), kGiB - 2 * kContext - 256 * kMiB);

  holder.kill_now();  // its context goes with it
  holder.wait(10s);
  const WorkloadRun after =
      run_workload(kAllocator, {"--path", "linear", "--target", "1G", "--chunk", "64M"}, tenant());
  ASSERT_EQ(after.exit_status, 0) << after.describe();
  EXPECT_EQ(after.report.number("bytes"), kGiB - kContext) << after.describe();
}

}  // namespace
}  // namespace integration
