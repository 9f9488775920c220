#include <gtest/gtest.h>

#include "run/device_check.h"
#include "run/visible_devices.h"

namespace gpulimit::cli {
namespace {

const std::vector<std::string> kGpus = {
    "GPU-fa4ec0da-0000-4000-8000-000000000000",
    "GPU-fa4ec0da-0000-4000-8000-000000000001",
    "GPU-0b1c2d3e-0000-4000-8000-000000000002",
};

TEST(VisibleDevices, EveryGpuWithoutAMask) {
  EXPECT_EQ(count_visible_devices(kGpus, std::nullopt), 3u);
  EXPECT_EQ(count_visible_devices({}, std::nullopt), 0u);
}

TEST(VisibleDevices, IndicesBelowTheCount) {
  EXPECT_EQ(count_visible_devices(kGpus, "2"), 1u);
  EXPECT_EQ(count_visible_devices(kGpus, "2,0,1"), 3u);
  EXPECT_EQ(count_visible_devices(kGpus, " 1 , 0 "), 2u);
}

TEST(VisibleDevices, UuidsAndUniquePrefixesInAnyCase) {
  EXPECT_EQ(count_visible_devices(kGpus, "GPU-fa4ec0da-0000-4000-8000-000000000001"), 1u);
  EXPECT_EQ(count_visible_devices(kGpus, "gpu-0B1C,GPU-FA4EC0DA-0000-4000-8000-000000000000"), 2u);
}

TEST(VisibleDevices, TheFirstInvalidEntryEndsTheList) {
  EXPECT_EQ(count_visible_devices(kGpus, "0,3,1"), 1u);           // unknown index
  EXPECT_EQ(count_visible_devices(kGpus, "1,-1,0"), 1u);          // malformed
  EXPECT_EQ(count_visible_devices(kGpus, "0,,1"), 1u);            // empty entry
  EXPECT_EQ(count_visible_devices(kGpus, "1,1,0"), 1u);           // repeated
  EXPECT_EQ(count_visible_devices(kGpus, "GPU-fa4ec0da,2"), 0u);  // ambiguous prefix
  EXPECT_EQ(count_visible_devices(kGpus, "2,GPU-0b1c"), 1u);      // the same GPU twice
  EXPECT_EQ(count_visible_devices(kGpus, "GPU-ffff"), 0u);        // no such GPU
  EXPECT_EQ(count_visible_devices(kGpus, "99999999999999999999999"), 0u);
  EXPECT_EQ(count_visible_devices(kGpus, "-1"), 0u);
}

TEST(VisibleDevices, AnEmptyMaskHidesEveryDevice) {
  EXPECT_EQ(count_visible_devices(kGpus, ""), 0u);
}

TEST(VisibleDevices, MigInstancesCountAsDevices) {
  EXPECT_EQ(count_visible_devices(kGpus, "MIG-5c7a3c6e-0000-4000-8000-000000000000"), 1u);
}

TEST(VisibleDevices, DescribedInOneLine) {
  EXPECT_EQ(describe_visible_devices(0), "no device");
  EXPECT_EQ(describe_visible_devices(1), "1 device, 0");
  EXPECT_EQ(describe_visible_devices(8), "8 devices, 0 to 7");
}

}  // namespace
}  // namespace gpulimit::cli
