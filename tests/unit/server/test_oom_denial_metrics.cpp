// Out-of-memory denials: counted in the tenant's ledger where the cap refuses
// a reservation, and read back by the server's ledger inspection.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpulimit/shm/ledger_inspection.h"
#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/testing/temporary_directory.h"

namespace gpulimit::shm {
namespace {

std::array<unsigned char, 16> uuid_of(int n) {
  std::array<unsigned char, 16> uuid{};
  std::memcpy(uuid.data(), "GPU-denial-test", 15);
  uuid[15] = static_cast<unsigned char>(n);
  return uuid;
}

class OomDenialMetrics : public ::testing::Test {
 protected:
  std::unique_ptr<TenantLedger> open_ledger() {
    std::string error;
    std::unique_ptr<TenantLedger> ledger = TenantLedger::open(dir_.path(), "job", error);
    EXPECT_NE(ledger, nullptr) << error;
    return ledger;
  }

  std::vector<LedgerDeviceUsage> inspect() const {
    std::vector<LedgerDeviceUsage> devices;
    std::string error;
    EXPECT_TRUE(read_ledger_usage(TenantLedger::path_for(dir_.path(), geteuid(), "job"), geteuid(),
                                  devices, error))
        << error;
    return devices;
  }

  gpulimit::testing::TemporaryDirectory dir_;
};

TEST_F(OomDenialMetrics, CountsEachReservationTheCapRefuses) {
  std::unique_ptr<TenantLedger> sut = open_ledger();
  const int dev = sut->device(uuid_of(0).data(), 1'000);
  ASSERT_TRUE(sut->reserve(dev, 600));

  EXPECT_FALSE(sut->reserve(dev, 401));
  EXPECT_FALSE(sut->reserve(dev, 5'000));
  EXPECT_TRUE(sut->reserve(dev, 400));
  EXPECT_FALSE(sut->reserve(dev, 1));

  const std::vector<LedgerDeviceUsage> devices = inspect();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].oom_denials, 3u);
  EXPECT_EQ(devices[0].used, 1'000u);
  EXPECT_EQ(devices[0].cap, 1'000u);
}

TEST_F(OomDenialMetrics, CountsPerDeviceAndNotForReservationsThatFit) {
  std::unique_ptr<TenantLedger> sut = open_ledger();
  const int small = sut->device(uuid_of(0).data(), 100);
  const int large = sut->device(uuid_of(1).data(), 1'000'000);

  EXPECT_FALSE(sut->reserve(small, 200));
  EXPECT_TRUE(sut->reserve(large, 200));
  sut->release(large, 200);

  const std::vector<LedgerDeviceUsage> devices = inspect();
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].oom_denials, 1u);
  EXPECT_EQ(devices[1].oom_denials, 0u);
}

TEST_F(OomDenialMetrics, AreSharedByEveryProcessOfTheTenant) {
  std::unique_ptr<TenantLedger> one = open_ledger();
  std::unique_ptr<TenantLedger> other = open_ledger();  // a second attachment, as a second process
  const int dev_one = one->device(uuid_of(0).data(), 100);
  const int dev_other = other->device(uuid_of(0).data(), 100);

  EXPECT_FALSE(one->reserve(dev_one, 101));
  EXPECT_FALSE(other->reserve(dev_other, 101));

  EXPECT_EQ(inspect().at(0).oom_denials, 2u);
}

TEST_F(OomDenialMetrics, NothingIsCountedForADetachedProcess) {
  std::unique_ptr<TenantLedger> sut = open_ledger();
  const int dev = sut->device(uuid_of(0).data(), 100);
  std::unique_ptr<TenantLedger> keeper = open_ledger();  // keeps the file in use
  sut->detach();

  EXPECT_FALSE(sut->reserve(dev, 101));

  EXPECT_EQ(inspect().at(0).oom_denials, 0u) << "not attached is no denial at the cap";
}

}  // namespace
}  // namespace gpulimit::shm
