#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "gpulimit/cupti_trace/activity_records.h"

namespace gpulimit::cupti_trace {
namespace {

constexpr uint64_t kRealtime = 1'780'000'000'000'000'000ull;
constexpr uint64_t kMonotonic = 50'000'000'000ull;

ClockOffset realtime_clock() {
  const std::array<ClockSample, 1> samples{{{kMonotonic, kRealtime, kMonotonic}}};
  return *ClockOffset::from_samples(samples);
}

KernelActivity kernel_record(uint64_t start, uint64_t end) {
  KernelActivity record;
  std::memset(&record, 0, sizeof record);
  record.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  record.start = start;
  record.end = end;
  record.deviceId = 0;
  record.streamId = 13;
  record.name = "_Z4spinyPy";
  return record;
}

TEST(ConvertKernel, MovesTimesToTheMonotonicClockAndMapsTheDevice) {
  // Arrange
  const KernelActivity record = kernel_record(kRealtime + 1'000, kRealtime + 3'500);
  DeviceMap devices;
  devices.learn(0, 1);

  // Act
  const KernelConversion result = convert_kernel(record, 321, realtime_clock(), devices);

  // Assert
  ASSERT_EQ(result.verdict, KernelVerdict::kept);
  EXPECT_TRUE(result.device_from_record);
  EXPECT_EQ(format_line(result.interval).text(), "321 1 13 " + std::to_string(kMonotonic + 1'000) +
                                                     " " + std::to_string(kMonotonic + 3'500) +
                                                     " _Z4spinyPy\n");
}

TEST(ConvertKernel, KeepsAZeroLengthKernel) {
  // Arrange
  const KernelActivity record = kernel_record(kRealtime + 10, kRealtime + 10);

  // Act
  const KernelConversion result = convert_kernel(record, 1, realtime_clock(), DeviceMap());

  // Assert
  ASSERT_EQ(result.verdict, KernelVerdict::kept);
  EXPECT_EQ(result.interval.start_ns, result.interval.end_ns);
  EXPECT_FALSE(result.device_from_record);
}

TEST(ConvertKernel, SkipsAKernelWithoutTimestamps) {
  // Arrange: CUPTI lacked the device memory to time it
  const KernelActivity record = kernel_record(kRealtime, 0);

  // Act
  const KernelConversion result = convert_kernel(record, 1, realtime_clock(), DeviceMap());

  // Assert
  EXPECT_EQ(result.verdict, KernelVerdict::no_timestamps);
}

TEST(ConvertKernel, SkipsAKernelThatEndsBeforeItStarts) {
  // Arrange
  const KernelActivity record = kernel_record(kRealtime + 5, kRealtime + 4);

  // Act
  const KernelConversion result = convert_kernel(record, 1, realtime_clock(), DeviceMap());

  // Assert
  EXPECT_EQ(result.verdict, KernelVerdict::end_before_start);
}

TEST(ConvertKernel, SkipsAKernelFromBeforeTheMonotonicZero) {
  // Arrange
  const KernelActivity record = kernel_record(1'000, 2'000);

  // Act
  const KernelConversion result = convert_kernel(record, 1, realtime_clock(), DeviceMap());

  // Assert
  EXPECT_EQ(result.verdict, KernelVerdict::outside_clock);
}

TEST(ConvertKernel, LeavesAKernelStartedBeforeTheForkToTheParent) {
  // Arrange: a child forked at monotonic kMonotonic + 500
  const KernelActivity parents = kernel_record(kRealtime + 499, kRealtime + 900);
  const KernelActivity childs = kernel_record(kRealtime + 500, kRealtime + 900);

  // Act
  const KernelConversion before =
      convert_kernel(parents, 2, realtime_clock(), DeviceMap(), kMonotonic + 500);
  const KernelConversion after =
      convert_kernel(childs, 2, realtime_clock(), DeviceMap(), kMonotonic + 500);

  // Assert
  EXPECT_EQ(before.verdict, KernelVerdict::before_fork);
  EXPECT_EQ(after.verdict, KernelVerdict::kept);
}

TEST(ConvertKernel, NamesAKernelWithoutAName) {
  // Arrange
  KernelActivity record = kernel_record(kRealtime + 1, kRealtime + 2);
  record.name = nullptr;

  // Act
  const KernelConversion result = convert_kernel(record, 7, realtime_clock(), DeviceMap());

  // Assert
  ASSERT_EQ(result.verdict, KernelVerdict::kept);
  EXPECT_EQ(format_line(result.interval).text(), "7 0 13 " + std::to_string(kMonotonic + 1) + " " +
                                                     std::to_string(kMonotonic + 2) + " unnamed\n");
}

TEST(DeviceIdentity, ReadsTheIdAndUuid) {
  // Arrange
  DeviceActivity record;
  std::memset(&record, 0, sizeof record);
  record.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  record.id = 3;
  CUuuid uuid{};
  for (int i = 0; i < 16; ++i)
    uuid.bytes[i] = static_cast<char>(i * 17);
  record.uuid = uuid;

  // Act
  const DeviceIdentity identity = device_identity(record);

  // Assert
  EXPECT_EQ(identity.cupti_id, 3u);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(identity.uuid[i], static_cast<unsigned char>(i * 17));
}

}  // namespace
}  // namespace gpulimit::cupti_trace
