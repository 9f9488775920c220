// The driver's per-process memory against the tenants' ledgers
// (driver_cross_check.h), on plain figures.
#include <gtest/gtest.h>

#include "gpulimit/server/watcher/driver_cross_check.h"

namespace gpulimit::server {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kThreshold = 64 * kMiB;
const std::string kGpu0 = "GPU-11223344-5566-7788-99aa-bbccddeeff00";
const std::string kGpu1 = "GPU-a1a2a3a4-a5a6-a7a8-a9aa-abacadaeafb0";

TenantLedgerView tenant(const std::string& id, std::vector<pid_t> pids, uint64_t used,
                        uint64_t cap) {
  TenantLedgerView view;
  view.tenant = id;
  view.uid = 1000;
  view.gid = 100;
  view.pids = std::move(pids);
  view.devices.push_back({kGpu0, used, cap});
  return view;
}

TEST(DriverCrossCheck, FindsNothingWhenDriverAndLedgerAgree) {
  const std::vector<DriverDeviceSample> driver = {{kGpu0, {{501, 300 * kMiB}, {502, 200 * kMiB}}}};

  const CrossCheckFindings sut =
      cross_check(driver, {tenant("a", {501, 502}, 510 * kMiB, 1024 * kMiB)}, kThreshold);

  EXPECT_TRUE(sut.drifts.empty());
  EXPECT_TRUE(sut.over_cap.empty());
  EXPECT_TRUE(sut.strangers.empty());
}

TEST(DriverCrossCheck, ReportsDriftBeyondTheThresholdEitherWay) {
  const std::vector<DriverDeviceSample> driver = {{kGpu0, {{501, 900 * kMiB}, {601, 10 * kMiB}}}};

  const CrossCheckFindings sut = cross_check(
      driver, {tenant("more", {501}, 100 * kMiB, 0), tenant("less", {601}, 500 * kMiB, 0)},
      kThreshold);

  ASSERT_EQ(sut.drifts.size(), 2u);
  EXPECT_EQ(sut.drifts[0].tenant, "more");
  EXPECT_EQ(sut.drifts[0].driver_bytes, 900 * kMiB);
  EXPECT_EQ(sut.drifts[0].ledger_bytes, 100 * kMiB);
  EXPECT_EQ(sut.drifts[1].tenant, "less");
  EXPECT_EQ(sut.drifts[1].driver_bytes, 10 * kMiB);
  EXPECT_EQ(sut.drifts[1].ledger_bytes, 500 * kMiB);
}

TEST(DriverCrossCheck, ReportsAProcessThatIsNoTenantsAsAStranger) {
  const std::vector<DriverDeviceSample> driver = {{kGpu0, {{501, 10 * kMiB}}},
                                                  {kGpu1, {{777, 2048 * kMiB}}}};

  const CrossCheckFindings sut =
      cross_check(driver, {tenant("a", {501}, 10 * kMiB, 0)}, kThreshold);

  ASSERT_EQ(sut.strangers.size(), 1u);
  EXPECT_EQ(sut.strangers[0].pid, 777);
  EXPECT_EQ(sut.strangers[0].uuid, kGpu1);
  EXPECT_EQ(sut.strangers[0].bytes, 2048 * kMiB);
}

TEST(DriverCrossCheck, ReportsATenantOverItsCapByTheDriversAccount) {
  const std::vector<DriverDeviceSample> driver = {
      {kGpu0, {{501, 700 * kMiB}, {503, 1 * kMiB}, {502, 600 * kMiB}}}};

  const CrossCheckFindings sut =
      cross_check(driver, {tenant("a", {501, 502}, 1000 * kMiB, 1024 * kMiB)}, 1024 * kMiB);

  ASSERT_EQ(sut.over_cap.size(), 1u);
  EXPECT_EQ(sut.over_cap[0].tenant, "a");
  EXPECT_EQ(sut.over_cap[0].driver_bytes, 1300 * kMiB);
  EXPECT_EQ(sut.over_cap[0].cap, 1024 * kMiB);
  EXPECT_EQ(sut.over_cap[0].pids, (std::vector<pid_t>{501, 502}));
  EXPECT_EQ(sut.over_cap[0].uid, 1000u);
  ASSERT_EQ(sut.strangers.size(), 1u) << "503 is nobody's";
  EXPECT_TRUE(sut.drifts.empty()) << "300 MiB apart, under this test's threshold";
}

TEST(DriverCrossCheck, AnUncappedTenantIsNeverOverCap) {
  const std::vector<DriverDeviceSample> driver = {{kGpu0, {{501, 80'000 * kMiB}}}};

  const CrossCheckFindings sut =
      cross_check(driver, {tenant("a", {501}, 80'000 * kMiB, 0)}, kThreshold);

  EXPECT_TRUE(sut.over_cap.empty());
  EXPECT_TRUE(sut.drifts.empty());
}

TEST(DriverCrossCheck, MemoryOnAGpuTheLedgerNeverChargedIsDrift) {
  const std::vector<DriverDeviceSample> driver = {{kGpu1, {{501, 512 * kMiB}}}};

  const CrossCheckFindings sut =
      cross_check(driver, {tenant("a", {501}, 0, 1024 * kMiB)}, kThreshold);

  ASSERT_EQ(sut.drifts.size(), 1u);
  EXPECT_EQ(sut.drifts[0].uuid, kGpu1);
  EXPECT_EQ(sut.drifts[0].ledger_bytes, 0u);
}

}  // namespace
}  // namespace gpulimit::server
