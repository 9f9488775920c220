// The per-process handshake of a grant: who owes an Ack, who is idle.
#include <gtest/gtest.h>

#include "gpulimit/server/scheduling/handoff_tracker.h"

namespace gpulimit::server {
namespace {

using Verdict = HandoffTracker::Verdict;
constexpr DeviceIndex kGpu = 3;
constexpr TenantNumber kT = 5;
constexpr uint32_t kGrant = 9;

TEST(HandoffTracker, TheHolderHasDrainedWhenEveryOwingProcessAcked) {
  HandoffTracker sut;
  sut.granted(kGpu, kT, kGrant);
  ASSERT_EQ(sut.revoked(kGpu, {1, 2}), Verdict::kNoted);

  EXPECT_EQ(sut.ack(kGpu, kT, 1, kGrant), Verdict::kNoted);
  EXPECT_EQ(sut.owing(kGpu), std::vector<ConnectionId>{2});
  EXPECT_EQ(sut.ack(kGpu, kT, 2, kGrant), Verdict::kComplete);
}

TEST(HandoffTracker, ARevokeNobodyCanAckIsDrainedAtOnce) {
  HandoffTracker sut;
  sut.granted(kGpu, kT, kGrant);

  EXPECT_EQ(sut.revoked(kGpu, {}), Verdict::kComplete);
}

TEST(HandoffTracker, AcksOfAnotherGrantTenantOrBeforeTheRevokeAreStale) {
  HandoffTracker sut;
  sut.granted(kGpu, kT, kGrant);

  EXPECT_EQ(sut.ack(kGpu, kT, 1, kGrant), Verdict::kStale) << "not revoked yet";
  sut.revoked(kGpu, {1});
  EXPECT_EQ(sut.ack(kGpu, kT, 1, kGrant - 1), Verdict::kStale);
  EXPECT_EQ(sut.ack(kGpu, kT + 1, 1, kGrant), Verdict::kStale);
  EXPECT_EQ(sut.ack(kGpu + 1, kT, 1, kGrant), Verdict::kStale);
  sut.released(kGpu);
  EXPECT_EQ(sut.ack(kGpu, kT, 1, kGrant), Verdict::kStale) << "after a forced release";
}

TEST(HandoffTracker, AProcessThatLeavesOwesNothing) {
  HandoffTracker sut;
  sut.granted(kGpu, kT, kGrant);
  sut.revoked(kGpu, {1, 2});
  ASSERT_EQ(sut.ack(kGpu, kT, 1, kGrant), Verdict::kNoted);

  EXPECT_TRUE(sut.process_left(kGpu, 2).drained);
  EXPECT_FALSE(sut.process_left(kGpu, 2).drained) << "once";
}

TEST(HandoffTracker, AForcedHoldersLateAcksCompleteItsLateDrain) {
  HandoffTracker sut;
  sut.granted(kGpu, kT, kGrant);
  sut.revoked(kGpu, {1, 2});
  ASSERT_EQ(sut.ack(kGpu, kT, 1, kGrant), Verdict::kNoted);
  sut.forced(kGpu);
  sut.granted(kGpu, kT + 1, kGrant + 1);

  EXPECT_EQ(sut.ack(kGpu, kT, 1, kGrant), Verdict::kStale) << "acknowledged before the timeout";
  EXPECT_EQ(sut.ack(kGpu, kT, 2, kGrant - 1), Verdict::kStale) << "not the grant it owed";
  EXPECT_EQ(sut.ack(kGpu, kT, 2, kGrant), Verdict::kLateDrained);
  EXPECT_EQ(sut.ack(kGpu, kT, 2, kGrant), Verdict::kStale) << "once";
}

TEST(HandoffTracker, AForcedHoldersLastOwingProcessLeavingCompletesItsLateDrain) {
  HandoffTracker sut;
  sut.granted(kGpu, kT, kGrant);
  sut.revoked(kGpu, {1, 2});
  sut.forced(kGpu);
  sut.granted(kGpu, kT + 1, kGrant + 1);

  EXPECT_EQ(sut.ack(kGpu, kT, 1, kGrant), Verdict::kNoted);
  const HandoffTracker::Left left = sut.process_left(kGpu, 2);
  EXPECT_FALSE(left.drained) << "the current holder's drain is not its";
  EXPECT_TRUE(left.late_drained);
  EXPECT_FALSE(sut.process_left(kGpu, 2).late_drained) << "once";
}

TEST(HandoffTracker, AForcedHoldersNextGrantEndsWhatItOwed) {
  HandoffTracker sut;
  sut.granted(kGpu, kT, kGrant);
  sut.revoked(kGpu, {1});
  sut.forced(kGpu);
  sut.granted(kGpu, kT, kGrant + 1);

  EXPECT_EQ(sut.ack(kGpu, kT, 1, kGrant), Verdict::kStale);
  EXPECT_FALSE(sut.process_left(kGpu, 1).late_drained);
}

TEST(HandoffTracker, TheHolderIsIdleWhenEveryProcessSeeingTheDeviceSaysSo) {
  HandoffTracker sut;
  sut.granted(kGpu, kT, kGrant);

  EXPECT_EQ(sut.idle(kGpu, kT, 1, kGrant, {1, 2}), Verdict::kNoted);
  EXPECT_FALSE(sut.all_idle(kGpu, {1, 2}));
  EXPECT_EQ(sut.idle(kGpu, kT, 2, kGrant, {1, 2}), Verdict::kComplete);
  EXPECT_TRUE(sut.all_idle(kGpu, {1}));
  EXPECT_EQ(sut.idle(kGpu, kT, 2, kGrant + 1, {1, 2}), Verdict::kStale);
  sut.granted(kGpu, kT, kGrant + 1);
  EXPECT_FALSE(sut.all_idle(kGpu, {1, 2})) << "idleness belongs to one grant";
}

}  // namespace
}  // namespace gpulimit::server
