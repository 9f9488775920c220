// The allocator on the simulated driver: every allocation path through every
// access path and stream mode reaches its target and gives the memory back;
// asking for more than the device has ends in CUDA_ERROR_OUT_OF_MEMORY; held
// memory is visible to other processes and comes back when its holder dies.
#include <gtest/gtest.h>

#include <csignal>
#include <numeric>
#include <tuple>
#include <vector>

#include "simulated_machine.h"
#include "test_parameters.h"

namespace integration {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// Paths whose `bytes` is exactly what was asked for; a mipmap chain is more.
bool obtains_exact_sizes(const std::string& path) {
  return path != "mipmap";
}

// Memory the path is charged for on the device. Managed memory is backed on
// first touch on a real GPU, so it need not lower free memory at all.
bool charges_device_memory(const std::string& path) {
  return path != "managed";
}

class AllocatorPathTest
    : public testing::TestWithParam<std::tuple<std::string, std::string, std::string>> {
 protected:
  const std::string& path() const { return std::get<0>(GetParam()); }
  const std::string& access() const { return std::get<1>(GetParam()); }
  const std::string& stream_mode() const { return std::get<2>(GetParam()); }

  SimulatedMachine machine_{"4G"};
};

TEST_P(AllocatorPathTest, ReachesTargetAndGivesMemoryBack) {
  const WorkloadRun sut =
      run_workload(kAllocator,
                   {"--path", path(), "--access", access(), "--stream-mode", stream_mode(),
                    "--target", "1G", "--chunk", "256M", "--retry"},
                   machine_.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  EXPECT_EQ(report.text("workload"), "allocator");
  EXPECT_EQ(report.text("path"), path());
  EXPECT_EQ(report.text("access"), access());
  EXPECT_EQ(report.text("stream_mode"), stream_mode());
  EXPECT_EQ(report.text("error"), "none");
  EXPECT_EQ(report.number("error_code"), 0u);
  EXPECT_EQ(report.number("target"), 1 * kGiB);
  const uint64_t bytes = report.number("bytes");
  if (obtains_exact_sizes(path())) {
    EXPECT_EQ(bytes, 1 * kGiB);
    EXPECT_EQ(report.number("chunks"), 4u);
  } else {
    EXPECT_GE(bytes, 1 * kGiB);
  }
  EXPECT_EQ(report.number("total"), 4 * kGiB);
  const uint64_t free_before = report.number("free_before");
  if (charges_device_memory(path())) {
    EXPECT_LE(report.number("free_after_alloc") + bytes, free_before) << sut.out;
  }
  EXPECT_EQ(report.number("free_after_free"), free_before) << sut.out;
  if (path() == "pool") {
    EXPECT_EQ(report.number("pool_reserved_after_trim"), 0u);
  }

  EXPECT_EQ(report.number("retry_bytes"), bytes);
  EXPECT_EQ(report.text("retry_error"), "none");
  EXPECT_EQ(report.number("free_after_retry_free"), free_before) << sut.out;
}

INSTANTIATE_TEST_SUITE_P(EveryPath, AllocatorPathTest,
                         testing::Combine(testing::ValuesIn(kAllocationPaths),
                                          testing::ValuesIn(kAccessPaths),
                                          testing::ValuesIn(kStreamModes)),
                         PathNamer());

class AllocatorOutOfMemoryTest : public testing::TestWithParam<std::string> {
 protected:
  SimulatedMachine machine_{"4G"};
};

TEST_P(AllocatorOutOfMemoryTest, StopsWithOutOfMemoryWithinOneChunkOfFreeMemory) {
  const std::string& path = GetParam();
  const uint64_t chunk = 256 * kMiB;

  const WorkloadRun sut =
      run_workload(kAllocator, {"--path", path, "--target", "8G", "--chunk", "256M", "--retry"},
                   machine_.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  EXPECT_EQ(report.text("error"), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(report.number("error_code"), 2u);
  const uint64_t free_before = report.number("free_before");
  const uint64_t bytes = report.number("bytes");
  EXPECT_LE(bytes, free_before);
  // What the driver refused was one chunk (a mipmap chain: a third more).
  const uint64_t refused = path == "mipmap" ? chunk * 4 / 3 + 1 : chunk;
  EXPECT_GT(bytes + refused, free_before) << sut.out;
  EXPECT_EQ(report.number("free_after_free"), free_before) << sut.out;
  // Freed memory is reusable: the same amount again.
  EXPECT_EQ(report.number("retry_bytes"), bytes);
  EXPECT_EQ(report.text("retry_error"), "none");
}

// Managed memory can oversubscribe the device on a real GPU, so running out
// is not what it should do.
INSTANTIATE_TEST_SUITE_P(DeviceMemoryPaths, AllocatorOutOfMemoryTest,
                         testing::Values("linear", "pitch", "async", "pool", "vmm", "array",
                                         "array3d", "mipmap"),
                         [](const auto& test) { return test_name(test.param); });

TEST(AllocatorTest, WithoutTargetAllocatesUntilRefused) {
  SimulatedMachine machine("2G");

  const WorkloadRun sut = run_workload(kAllocator, {"--chunk", "64M"}, machine.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  EXPECT_EQ(sut.report.text("error"), "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(sut.report.number("target"), 4 * kGiB);
  EXPECT_GT(sut.report.number("bytes") + 64 * kMiB, sut.report.number("free_before"));
}

TEST(AllocatorTest, InfoDescribesDeviceWithoutAllocating) {
  SimulatedMachine machine("4G", "256M");

  const WorkloadRun sut = run_workload(kAllocator, {"--info"}, machine.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  EXPECT_EQ(report.number("device_total"), 4 * kGiB);
  EXPECT_EQ(report.number("total"), 4 * kGiB);
  EXPECT_EQ(report.number("free"), 4 * kGiB - 256 * kMiB);  // the context takes some
  EXPECT_GE(report.number("driver_version"), 12000u);
  EXPECT_FALSE(report.text("device_name").empty());
  EXPECT_FALSE(report.has("bytes"));
}

// A second process sees memory the first holds, and gets it back once the
// holder is killed: the driver frees a dead process's memory.
TEST(AllocatorTest, HeldMemoryIsVisibleToOthersAndComesBackWhenHolderDies) {
  SimulatedMachine machine("4G");
  const WorkloadRun idle = run_workload(kAllocator, {"--info"}, machine.environment());
  ASSERT_EQ(idle.exit_status, 0) << idle.describe();

  WorkloadProcess holder(kAllocator, {"--target", "1G", "--hold", "60"}, machine.environment());
  ASSERT_TRUE(holder.wait_for_output("event=holding", 30s));
  const WorkloadRun observed = run_workload(kAllocator, {"--info"}, machine.environment());
  holder.kill_now();
  const WorkloadRun killed = holder.wait(30s);
  const WorkloadRun after = run_workload(kAllocator, {"--info"}, machine.environment());

  ASSERT_EQ(observed.exit_status, 0) << observed.describe();
  ASSERT_EQ(after.exit_status, 0) << after.describe();
  EXPECT_EQ(killed.exit_status, 128 + SIGKILL);
  // The holder's 1G and its context are charged while it lives.
  EXPECT_LE(observed.report.number("free") + 1 * kGiB, idle.report.number("free"));
  EXPECT_EQ(after.report.number("free"), idle.report.number("free"));
}

TEST(AllocatorTest, HoldAnnouncesHeldMemoryBeforeWaiting) {
  SimulatedMachine machine("4G");

  const WorkloadRun sut =
      run_workload(kAllocator, {"--target", "512M", "--hold", "0.2"}, machine.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const std::string first_line = sut.out.substr(0, sut.out.find('\n'));
  const Report holding = Report::parse(first_line);
  EXPECT_EQ(holding.text("event"), "holding");
  EXPECT_EQ(holding.number("bytes"), 512 * kMiB);
  EXPECT_EQ(holding.number("free_after_alloc"), sut.report.number("free_after_alloc"));
  EXPECT_FALSE(sut.report.has("event"));
}

TEST(AllocatorTest, ThreadsShareOneTargetAndSayWhatEachObtained) {
  SimulatedMachine machine("4G");

  const WorkloadRun sut =
      run_workload(kAllocator, {"--threads", "8", "--target", "1G", "--chunk", "16M", "--retry"},
                   machine.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  EXPECT_EQ(report.number("threads"), 8u);
  EXPECT_EQ(report.text("error"), "none");
  EXPECT_EQ(report.number("bytes"), 1 * kGiB);
  EXPECT_EQ(report.number("chunks"), 64u);
  const std::vector<uint64_t> per_thread = report.numbers("thread_bytes");
  EXPECT_EQ(per_thread.size(), 8u);
  EXPECT_EQ(std::accumulate(per_thread.begin(), per_thread.end(), uint64_t{0}), 1 * kGiB);
  EXPECT_EQ(report.number("free_after_free"), report.number("free_before")) << sut.out;
  EXPECT_EQ(report.number("retry_bytes"), 1 * kGiB);
}

TEST(AllocatorTest, ThreadsStopWhereTheDriverRefuses) {
  SimulatedMachine machine("4G");

  const WorkloadRun sut = run_workload(
      kAllocator, {"--path", "vmm", "--threads", "8", "--target", "8G", "--chunk", "64M"},
      machine.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report& report = sut.report;
  EXPECT_EQ(report.text("error"), "CUDA_ERROR_OUT_OF_MEMORY");
  const uint64_t free_before = report.number("free_before");
  EXPECT_LE(report.number("bytes"), free_before);
  EXPECT_GT(report.number("bytes") + 64 * kMiB, free_before) << sut.out;
  EXPECT_EQ(report.number("free_after_free"), free_before) << sut.out;
}

TEST(AllocatorTest, RoundsRepeatTheAllocationAndTheFree) {
  SimulatedMachine machine("4G");

  const WorkloadRun sut = run_workload(
      kAllocator, {"--threads", "2", "--rounds", "5", "--target", "512M", "--chunk", "64M"},
      machine.environment());

  ASSERT_EQ(sut.exit_status, 0) << sut.describe();
  const Report looping = Report::parse(sut.out.substr(0, sut.out.find('\n')));
  EXPECT_EQ(looping.text("event"), "looping");
  const Report& report = sut.report;
  EXPECT_EQ(report.number("rounds"), 5u);
  EXPECT_EQ(report.number("bytes"), 512 * kMiB);
  EXPECT_EQ(report.number("free_after_free"), report.number("free_before")) << sut.out;
  const WorkloadRun after = run_workload(kAllocator, {"--info"}, machine.environment());
  ASSERT_EQ(after.exit_status, 0) << after.describe();
  EXPECT_EQ(after.report.number("free"), report.number("free_before")) << "nothing left behind";
}

}  // namespace
}  // namespace integration
