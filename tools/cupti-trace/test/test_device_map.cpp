#include <gtest/gtest.h>

#include <string>

#include "gpulimit/cupti_trace/device_map.h"

namespace gpulimit::cupti_trace {
namespace {

TEST(FormatUuid, WritesNvmlsForm) {
  // Arrange: the simulator's device 1
  const unsigned char bytes[16] = {0xfa, 0x4e, 0xc0, 0xda, 0x00, 0x00, 0x40, 0x00,
                                   0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01};
  char text[kUuidTextBytes];

  // Act
  format_uuid(bytes, text);

  // Assert
  EXPECT_EQ(std::string(text), "GPU-fa4ec0da-0000-4000-8000-000000000001");
}

TEST(DeviceMap, GivesTheLearntPhysicalIndex) {
  // Arrange: CUDA_VISIBLE_DEVICES=2,0 makes CUPTI's 0 physical 2, its 1 physical 0
  DeviceMap sut;
  sut.learn(0, 2);
  sut.learn(1, 0);

  // Act
  const DeviceMap::Resolution first = sut.resolve(0);
  const DeviceMap::Resolution second = sut.resolve(1);

  // Assert
  EXPECT_EQ(first.physical, 2u);
  EXPECT_TRUE(first.from_device_record);
  EXPECT_EQ(second.physical, 0u);
  EXPECT_TRUE(second.from_device_record);
}

TEST(DeviceMap, FallsBackToCuptisIdWithoutADeviceRecord) {
  // Arrange
  DeviceMap sut;
  sut.learn(0, 5);

  // Act
  const DeviceMap::Resolution unknown = sut.resolve(3);

  // Assert
  EXPECT_EQ(unknown.physical, 3u);
  EXPECT_FALSE(unknown.from_device_record);
}

TEST(DeviceMap, FallsBackWhenNvmlDidNotKnowTheUuid) {
  // Arrange
  DeviceMap sut;
  sut.learn(1, std::nullopt);

  // Act
  const DeviceMap::Resolution resolution = sut.resolve(1);

  // Assert
  EXPECT_EQ(resolution.physical, 1u);
  EXPECT_FALSE(resolution.from_device_record);
}

TEST(DeviceMap, ALaterRecordReplacesAnEarlierOne) {
  // Arrange
  DeviceMap sut;
  sut.learn(0, 4);

  // Act
  sut.learn(0, 6);

  // Assert
  EXPECT_EQ(sut.resolve(0).physical, 6u);
}

TEST(DeviceMap, IgnoresIdsBeyondItsCapacity) {
  // Arrange
  DeviceMap sut;

  // Act
  sut.learn(DeviceMap::kMaxDevices, 1);

  // Assert
  const DeviceMap::Resolution resolution = sut.resolve(DeviceMap::kMaxDevices);
  EXPECT_EQ(resolution.physical, DeviceMap::kMaxDevices);
  EXPECT_FALSE(resolution.from_device_record);
}

}  // namespace
}  // namespace gpulimit::cupti_trace
