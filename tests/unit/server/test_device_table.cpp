// The server's device table: which devices a Hello may name (MachineGpus),
// and the board's slots, published all or nothing and withdrawn for reuse
// (TokenBoard), and the scheduler forgetting a withdrawn device.
#include <gtest/gtest.h>

#include <cstring>

#include "gpulimit/server/loop/machine_gpus.h"
#include "gpulimit/server/scheduling/token_board.h"
#include "gpulimit/server/scheduling/token_scheduler.h"

namespace gpulimit::server {
namespace {

DeviceUuid gpu(unsigned char series, unsigned char index) {
  DeviceUuid uuid{};
  uuid[0] = series;
  uuid[15] = index;
  return uuid;
}

std::vector<DeviceUuid> gpus(unsigned char series, std::size_t count) {
  std::vector<DeviceUuid> uuids;
  for (std::size_t i = 0; i < count; ++i)
    uuids.push_back(gpu(series, static_cast<unsigned char>(i)));
  return uuids;
}

TEST(MachineGpus, AKnownViewServesOnlyItsGpus) {
  const MachineGpus sut = MachineGpus::listed(gpus(1, 2));

  EXPECT_FALSE(sut.refusal(gpus(1, 2), ServerMode::kSystem));
  EXPECT_FALSE(sut.refusal(gpus(1, 2), ServerMode::kUser));
  EXPECT_FALSE(sut.refusal({}, ServerMode::kSystem));
  const std::optional<std::string> refused = sut.refusal({gpu(1, 0), gpu(7, 0)}, ServerMode::kUser);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("GPU-07000000-0000-0000-0000-000000000000"), std::string::npos)
      << *refused;
}

TEST(MachineGpus, WithoutAViewASystemServerServesNoGpuAndAUserServerItsOwn) {
  const MachineGpus sut = MachineGpus::unknown("libnvidia-ml.so.1 cannot be loaded");

  const std::optional<std::string> refused = sut.refusal(gpus(1, 1), ServerMode::kSystem);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("libnvidia-ml.so.1 cannot be loaded"), std::string::npos);
  EXPECT_FALSE(sut.refusal({}, ServerMode::kSystem));
  EXPECT_FALSE(sut.refusal(gpus(1, 3), ServerMode::kUser));
}

class Board : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<TokenBoard>> created = TokenBoard::create(20'000);
    ASSERT_TRUE(created) << created.error();
    sut_ = std::move(*created);
  }
  std::unique_ptr<TokenBoard> sut_;
};

TEST_F(Board, APublishThatDoesNotFitWritesNothing) {
  ASSERT_TRUE(sut_->publish(gpus(1, 10)));

  EXPECT_FALSE(sut_->publish(gpus(2, 7)));

  EXPECT_EQ(sut_->devices_in_use(), 10u);
  EXPECT_EQ(sut_->layout().device_count.load(), 10u);
  for (DeviceIndex d = 10; d < shm::kBoardDevices; ++d)
    EXPECT_EQ(sut_->uuid(d), DeviceUuid{}) << d;
  EXPECT_TRUE(sut_->publish(gpus(2, 6)));
}

TEST_F(Board, ADeviceNamedAgainOrTwiceKeepsItsSlot) {
  const Result<std::vector<DeviceIndex>> first = sut_->publish({gpu(1, 0), gpu(1, 1), gpu(1, 0)});
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, (std::vector<DeviceIndex>{0, 1, 0}));
  const Result<std::vector<DeviceIndex>> again = sut_->publish({gpu(1, 1)});
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, std::vector<DeviceIndex>{1});
  EXPECT_EQ(sut_->devices_in_use(), 2u);
}

TEST_F(Board, AWithdrawnSlotIsZeroedAndTakenByTheNextDevice) {
  ASSERT_TRUE(sut_->publish(gpus(1, shm::kBoardDevices)));
  sut_->grant(3, 7);
  EXPECT_FALSE(sut_->publish({gpu(2, 0)}));

  sut_->withdraw(3);

  EXPECT_FALSE(sut_->in_use(3));
  EXPECT_EQ(sut_->uuid(3), DeviceUuid{});
  EXPECT_EQ(sut_->layout().devices[3].token.load(), 0u);
  const Result<std::vector<DeviceIndex>> next = sut_->publish({gpu(2, 0)});
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, std::vector<DeviceIndex>{3});
  EXPECT_EQ(sut_->uuid(3), gpu(2, 0));
  EXPECT_EQ(sut_->layout().device_count.load(), shm::kBoardDevices);
}

TEST(TokenSchedulerForget, AForgottenDeviceKeepsNoCountersOfItsFormerTenants) {
  TokenScheduler sut(SchedulerSettings{});
  constexpr TenantNumber kTenant = 1;
  sut.add_tenant(kTenant, ComputeShare{});
  sut.set_wanting(kTenant, 0, true, 0);
  sut.leave_device(kTenant, 0, 1'000'000);
  ASSERT_GT(sut.statistics(kTenant, 0, 2'000'000).grants, 0u);

  sut.forget_device(0, 2'000'000);

  EXPECT_EQ(sut.statistics(kTenant, 0, 3'000'000).grants, 0u);
  EXPECT_EQ(sut.holder(0), kNoTenant);
}

}  // namespace
}  // namespace gpulimit::server
