// What the scheduler counts per tenant and device (tenant_statistics.h),
// driven with made-up times as in test_token_scheduler.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "gpulimit/server/scheduling/token_scheduler.h"

namespace gpulimit::server {
namespace {

constexpr TimeNs kMs = kNsPerMs;
constexpr DeviceIndex kGpu = 0;
constexpr TenantNumber kA = 1;
constexpr TenantNumber kB = 2;

SchedulerSettings settings() {
  SchedulerSettings settings;
  settings.quantum_ns = 20 * kMs;
  settings.ack_timeout_ns = 100 * kMs;
  return settings;
}

// The index of the first bucket whose bound is at least `ns`.
std::size_t bucket_of(TimeNs ns) {
  std::size_t i = 0;
  while (WaitHistogram::kUpperBoundsNs[i] < ns)
    ++i;
  return i;
}

class SchedulerMetrics : public testing::Test {
 protected:
  void SetUp() override {
    sut.add_tenant(kA, ComputeShare{});
    sut.add_tenant(kB, ComputeShare{});
  }

  // A holds from 0; B wants at 5 ms; A's quantum ends at 20 ms and it drains
  // at `drained_at`: B is granted then, after waiting drained_at - 5 ms.
  void hand_over_to_b(TimeNs drained_at) {
    sut.set_wanting(kA, kGpu, true, 0);
    sut.set_wanting(kB, kGpu, true, 5 * kMs);
    sut.advance(20 * kMs);
    sut.holder_drained(kA, kGpu, drained_at);
  }

  TokenScheduler sut{settings()};
};

TEST_F(SchedulerMetrics, AHandoffCountsOneRevokeAndOneGrantWithItsWait) {
  hand_over_to_b(21 * kMs);

  const TenantDeviceCounters a = sut.statistics(kA, kGpu, 30 * kMs);
  const TenantDeviceCounters b = sut.statistics(kB, kGpu, 30 * kMs);
  EXPECT_EQ(sut.holder(kGpu), kB);
  EXPECT_EQ(a.grants, 1u);
  EXPECT_EQ(a.revokes, 1u);
  EXPECT_EQ(a.overruns, 0u);
  EXPECT_EQ(a.held_ns, 21 * kMs);
  EXPECT_EQ(a.wait_ns, 0);
  EXPECT_EQ(b.grants, 1u);
  EXPECT_EQ(b.revokes, 0u);
  EXPECT_EQ(b.wait_ns, 16 * kMs);
  EXPECT_EQ(b.held_ns, 9 * kMs) << "the running hold is included";
  EXPECT_EQ(b.waits.count(), 1u);
  EXPECT_EQ(b.waits.sum_ns(), 16 * kMs);
  EXPECT_EQ(b.waits.in_bucket(bucket_of(16 * kMs)), 1u);
}

TEST_F(SchedulerMetrics, AWaitStillRunningIsCountedButNotObserved) {
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 5 * kMs);

  const TenantDeviceCounters b = sut.statistics(kB, kGpu, 12 * kMs);

  EXPECT_EQ(b.wait_ns, 7 * kMs);
  EXPECT_EQ(b.grants, 0u);
  EXPECT_EQ(b.waits.count(), 0u) << "observed when the grant comes";
}

TEST_F(SchedulerMetrics, AWaitGivenUpCountsAsWaitTimeOnly) {
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 5 * kMs);

  sut.set_wanting(kB, kGpu, false, 8 * kMs);

  const TenantDeviceCounters b = sut.statistics(kB, kGpu, 50 * kMs);
  EXPECT_EQ(b.wait_ns, 3 * kMs);
  EXPECT_EQ(b.waits.count(), 0u);
  EXPECT_EQ(b.grants, 0u);
}

TEST_F(SchedulerMetrics, AHolderThatNeverDrainsIsCountedAsAnOverrun) {
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 5 * kMs);
  sut.advance(20 * kMs);  // revoked

  sut.advance(120 * kMs);  // the ack timeout passes

  EXPECT_EQ(sut.holder(kGpu), kB);
  EXPECT_EQ(sut.statistics(kA, kGpu, 120 * kMs).overruns, 1u);
  EXPECT_EQ(sut.statistics(kB, kGpu, 120 * kMs).overruns, 0u);
}

TEST_F(SchedulerMetrics, AHolderWantingAgainWhileDrainingWaitsFromItsRelease) {
  hand_over_to_b(21 * kMs);
  sut.set_wanting(kA, kGpu, true, 22 * kMs);
  sut.advance(41 * kMs);  // B's quantum ends
  ASSERT_TRUE(sut.revoked(kGpu));
  sut.set_wanting(kB, kGpu, true, 42 * kMs);  // B wants it again while draining

  sut.holder_drained(kB, kGpu, 45 * kMs);

  EXPECT_EQ(sut.holder(kGpu), kA);
  EXPECT_EQ(sut.statistics(kA, kGpu, 45 * kMs).wait_ns, 23 * kMs);
  EXPECT_EQ(sut.statistics(kB, kGpu, 50 * kMs).wait_ns, 16 * kMs + 5 * kMs)
      << "B's second wait starts at its release (45 ms), not at its Want (42 ms)";
}

TEST_F(SchedulerMetrics, CountersOutliveLeavingTheDeviceButNotTheTenant) {
  hand_over_to_b(21 * kMs);

  sut.leave_device(kA, kGpu, 30 * kMs);
  const TenantDeviceCounters after_leaving = sut.statistics(kA, kGpu, 30 * kMs);
  sut.remove_tenant(kA, 31 * kMs);
  const TenantDeviceCounters after_removal = sut.statistics(kA, kGpu, 31 * kMs);

  EXPECT_EQ(after_leaving.grants, 1u);
  EXPECT_EQ(after_leaving.held_ns, 21 * kMs);
  EXPECT_EQ(after_removal.grants, 0u);
  EXPECT_EQ(after_removal.held_ns, 0);
}

TEST_F(SchedulerMetrics, FiguresHeldTimeIsTheCountersHeldTime) {
  hand_over_to_b(21 * kMs);

  EXPECT_EQ(sut.figures(kA, kGpu, 30 * kMs).held_ns, sut.statistics(kA, kGpu, 30 * kMs).held_ns);
  EXPECT_EQ(sut.figures(kB, kGpu, 30 * kMs).held_ns, sut.statistics(kB, kGpu, 30 * kMs).held_ns);
}

TEST_F(SchedulerMetrics, ShareAchievedLooksBackTenSeconds) {
  sut.set_wanting(kB, kGpu, true, 0);
  sut.set_wanting(kA, kGpu, true, 1'000 * kMs);  // B's quantum is long over: revoked
  sut.holder_drained(kB, kGpu, 1'000 * kMs);     // B held [0, 1 s)

  // At 10.5 s the last 10 s hold half a second of B's hold: 5 %. (Over the
  // last 5 s it would be none.)
  const DeviceShareFigures b = sut.figures(kB, kGpu, 10'500 * kMs);

  EXPECT_EQ(sut.holder(kGpu), kA);
  EXPECT_NEAR(b.share_achieved, 0.05, 1e-9);
}

TEST(WaitHistogram, PutsAWaitInTheFirstBucketWhoseBoundHoldsIt) {
  WaitHistogram sut;

  sut.observe(100'000);         // exactly the first bound
  sut.observe(100'001);         // just above it
  sut.observe(20'000'000'000);  // above the last bound

  EXPECT_EQ(sut.in_bucket(0), 1u);
  EXPECT_EQ(sut.in_bucket(1), 1u);
  EXPECT_EQ(sut.above_last(), 1u);
  EXPECT_EQ(sut.count(), 3u);
  EXPECT_EQ(sut.sum_ns(), 20'000'200'001);
}

TEST(WaitHistogram, BoundsRiseFromAHundredMicrosecondsToTenSeconds) {
  const auto& bounds = WaitHistogram::kUpperBoundsNs;

  EXPECT_EQ(bounds.front(), 100'000);
  EXPECT_EQ(bounds.back(), 10'000'000'000);
  EXPECT_TRUE(std::is_sorted(bounds.begin(), bounds.end()));
}

}  // namespace
}  // namespace gpulimit::server
