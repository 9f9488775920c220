// Hierarchical shares: groups, their users, the users' tenants, driven with
// made-up times as the rest of the scheduler's rules are.
#include <gtest/gtest.h>

#include <map>
#include <utility>
#include <vector>

#include "busy_tenants.h"
#include "gpulimit/server/scheduling/share_targets.h"
#include "gpulimit/server/scheduling/token_scheduler.h"

namespace gpulimit::server {
namespace {

using protocol::Priority;

constexpr TimeNs kMs = kNsPerMs;
constexpr TimeNs kUs = 1'000;
constexpr uint32_t kMl = 100;  // gids
constexpr uint32_t kVision = 200;
constexpr uint32_t kAlice = 1000;  // uids
constexpr uint32_t kBob = 1001;
constexpr uint32_t kCarol = 1002;

ComputeShare weight(uint32_t w) {
  return ComputeShare{0, w, Priority::kNormal};
}
ShareBranch branch(uint32_t group, uint32_t user, uint32_t group_share = 1,
                   uint32_t user_share = 1) {
  return ShareBranch{group, user, group_share, user_share};
}
std::pair<ComputeShare, ShareBranch> placed(const ShareBranch& where, uint32_t w = 1) {
  return {weight(w), where};
}

// What fraction of the time held in all each tenant of `tenants` held.
double fraction(const BusyTenants& run, TenantNumber tenant,
                const std::vector<TenantNumber>& tenants) {
  TimeNs total = 0;
  for (const TenantNumber t : tenants)
    total += run.held(t);
  return total > 0 ? static_cast<double>(run.held(tenant)) / static_cast<double>(total) : 0;
}

TEST(FairShareTree, OneUsersEightJobsGetOneUsersShare) {
  TokenScheduler sut(SchedulerSettings{});
  BusyTenants run(sut, 100 * kUs);
  std::map<TenantNumber, std::pair<ComputeShare, ShareBranch>> tenants;
  std::vector<TenantNumber> all;
  for (TenantNumber t = 1; t <= 8; ++t) {
    tenants[t] = placed(branch(kMl, kAlice));
    all.push_back(t);
  }
  tenants[9] = placed(branch(kMl, kBob));
  all.push_back(9);

  run.start(tenants);
  run.run_until(20'000 * kMs);

  EXPECT_NEAR(fraction(run, 9, all), 0.5, 0.01) << "bob's one job, against alice's eight";
  for (TenantNumber t = 1; t <= 8; ++t)
    EXPECT_NEAR(fraction(run, t, all), 0.5 / 8, 0.01) << "alice's job " << t;
}

TEST(FairShareTree, GroupsOfUnequalSizeSplitByGroupShare) {
  TokenScheduler sut(SchedulerSettings{});
  BusyTenants run(sut, 100 * kUs);
  // ml (share 3): alice and bob, one job each; vision (share 1): carol's
  // two jobs.
  run.start({{1, placed(branch(kMl, kAlice, 3))},
             {2, placed(branch(kMl, kBob, 3))},
             {3, placed(branch(kVision, kCarol, 1))},
             {4, placed(branch(kVision, kCarol, 1))}});
  run.run_until(20'000 * kMs);

  const std::vector<TenantNumber> all = {1, 2, 3, 4};
  EXPECT_NEAR(fraction(run, 1, all), 0.375, 0.01);
  EXPECT_NEAR(fraction(run, 2, all), 0.375, 0.01);
  EXPECT_NEAR(fraction(run, 3, all), 0.125, 0.01);
  EXPECT_NEAR(fraction(run, 4, all), 0.125, 0.01);
}

TEST(FairShareTree, UsersSplitTheirGroupByUserShareAndTheirJobsByWeight) {
  TokenScheduler sut(SchedulerSettings{});
  BusyTenants run(sut, 100 * kUs);
  // alice (share 3) has a weight-3 and a weight-1 job; bob (share 1) one job.
  run.start({{1, placed(branch(kMl, kAlice, 1, 3), 3)},
             {2, placed(branch(kMl, kAlice, 1, 3), 1)},
             {3, placed(branch(kMl, kBob, 1, 1), 50)}});
  run.run_until(20'000 * kMs);

  const std::vector<TenantNumber> all = {1, 2, 3};
  EXPECT_NEAR(fraction(run, 1, all), 0.75 * 0.75, 0.01);
  EXPECT_NEAR(fraction(run, 2, all), 0.75 * 0.25, 0.01);
  EXPECT_NEAR(fraction(run, 3, all), 0.25, 0.01) << "a weight counts within its user only";
}

TEST(FairShareTree, AUserWhoComesBackAfterIdlingHasEarnedNoCredit) {
  TokenScheduler sut(SchedulerSettings{});
  BusyTenants run(sut, 0);
  run.start({{1, placed(branch(kMl, kAlice))}});
  run.run_until(10'000 * kMs);  // alice alone for 10 s

  run.join(2, weight(1), branch(kMl, kBob));
  const TimeNs alice_before = run.held(1);
  run.run_until(run.now() + 1'000 * kMs);

  EXPECT_NEAR(static_cast<double>(run.held(2)) / (1'000 * kMs), 0.5, 0.05);
  EXPECT_NEAR(static_cast<double>(run.held(1) - alice_before) / (1'000 * kMs), 0.5, 0.05);
}

TEST(FairShareTree, AGroupThatWasIdleWhileTheDeviceWasIdleHasEarnedNoCredit) {
  TokenScheduler sut(SchedulerSettings{});
  BusyTenants run(sut, 0);
  run.start({{1, placed(branch(kMl, kAlice))}, {2, placed(branch(kVision, kCarol))}});
  run.run_until(1'000 * kMs);
  run.stop(2);                  // carol's job ends
  run.run_until(11'000 * kMs);  // alice alone for 10 s
  run.leave(1);                 // then alice's too: the device idles

  // Vision comes back first, to an idle device, then ml.
  run.join(3, weight(1), branch(kVision, kCarol));
  run.join(4, weight(1), branch(kMl, kAlice));
  run.run_until(run.now() + 2'000 * kMs);

  EXPECT_NEAR(fraction(run, 3, {3, 4}), 0.5, 0.05) << "vision idled: no 10 s of credit";
}

TEST(FairShareTree, AReloadedGroupShareAppliesFromThenOn) {
  TokenScheduler sut(SchedulerSettings{});
  BusyTenants run(sut, 0);
  run.start({{1, placed(branch(kMl, kAlice))}, {2, placed(branch(kVision, kCarol))}});
  run.run_until(5'000 * kMs);
  const TimeNs alice_before = run.held(1), carol_before = run.held(2);

  sut.change_branch(1, branch(kMl, kAlice, 4), run.now());
  run.run_until(run.now() + 10'000 * kMs);

  const double alice = static_cast<double>(run.held(1) - alice_before);
  const double carol = static_cast<double>(run.held(2) - carol_before);
  EXPECT_NEAR(alice / (alice + carol), 0.8, 0.01);
}

TEST(FairShareTree, ABranchKeepsItsGroupAndUserWhenItsSharesChange) {
  TokenScheduler sut(SchedulerSettings{});
  BusyTenants run(sut, 0);
  run.start({{1, placed(branch(kMl, kAlice))}, {2, placed(branch(kMl, kAlice))}});
  // A reload cannot move a tenant to another group: only shares change.
  sut.change_branch(2, branch(kVision, kCarol, 9, 9), run.now());
  run.run_until(10'000 * kMs);

  EXPECT_NEAR(fraction(run, 1, {1, 2}), 0.5, 0.01);
}

TEST(FairShareTree, PriorityStillComesBeforeEveryShare) {
  TokenScheduler sut(SchedulerSettings{});
  BusyTenants run(sut, 0);
  run.start({{1, {ComputeShare{0, 1, Priority::kHigh}, branch(kVision, kCarol, 1)}},
             {2, placed(branch(kMl, kAlice, 1000))}});
  run.run_until(1'000 * kMs);

  EXPECT_EQ(run.held(2), 0) << "a normal tenant of a far larger group waits for a high one";
}

constexpr TimeNs kHalfLife = 60'000 * kMs;

SchedulerSettings with_half_life(TimeNs half_life) {
  SchedulerSettings settings;
  settings.usage_half_life_ns = half_life;
  return settings;
}

// Usage history: ml has used the device alone for five minutes, under a
// history of `half_life`; then vision comes.
struct AfterMlAlone {
  explicit AfterMlAlone(TimeNs half_life) : sut(with_half_life(half_life)), run(sut, 100 * kUs) {
    run.start({{1, placed(branch(kMl, kAlice))}});
    run.run_until(300'000 * kMs);
  }
  void vision_comes() { run.join(2, weight(1), branch(kVision, kCarol)); }
  // Vision's fraction of the time held over the next `window`.
  double vision_fraction_of(TimeNs window) {
    const TimeNs ml_before = run.held(1), vision_before = run.held(2);
    run.run_until(run.now() + window);
    const double ml = static_cast<double>(run.held(1) - ml_before);
    const double vision = static_cast<double>(run.held(2) - vision_before);
    return vision / (ml + vision);
  }

  TokenScheduler sut;
  BusyTenants run;
};

TEST(FairShareHistory, AGroupThatUsedMoreThanItsShareGetsLessUntilTheHistoryDecays) {
  AfterMlAlone sut(kHalfLife);
  sut.vision_comes();

  // At first ml's usage is all of it: 2^-2 against vision's 2^0, 1:4.
  EXPECT_NEAR(sut.vision_fraction_of(10'000 * kMs), 0.8, 0.03);
  sut.vision_fraction_of(1'200'000 * kMs);
  // Twenty half-lives of contention later both histories are alike.
  EXPECT_NEAR(sut.vision_fraction_of(10'000 * kMs), 0.5, 0.02);
}

TEST(FairShareHistory, WithoutHistoryTheSharesAreEvenAtOnce) {
  AfterMlAlone sut(0);
  sut.vision_comes();

  EXPECT_NEAR(sut.vision_fraction_of(10'000 * kMs), 0.5, 0.01);
}

TEST(FairShareHistory, TurningTheHistoryOffForgetsIt) {
  AfterMlAlone sut(kHalfLife);
  sut.sut.set_usage_half_life(0, sut.run.now());
  sut.sut.set_usage_half_life(kHalfLife, sut.run.now());  // and on again: nothing kept
  sut.vision_comes();

  EXPECT_NEAR(sut.vision_fraction_of(10'000 * kMs), 0.5, 0.02)
      << "ml's five minutes alone are forgotten";
}

TEST(FairShareHistory, TheTargetsCountTheFactors) {
  AfterMlAlone sut(kHalfLife);
  sut.vision_comes();

  EXPECT_NEAR(sut.sut.figures(2, kGpu, sut.run.now()).share_target, 0.8, 0.01);
  EXPECT_NEAR(sut.sut.figures(1, kGpu, sut.run.now()).share_target, 0.2, 0.01);
}

ShareDemand demand(TenantNumber tenant, const ComputeShare& share, const ShareBranch& where) {
  ShareDemand demand;
  demand.tenant = tenant;
  demand.share = share;
  demand.branch = where;
  return demand;
}

TEST(FairShareTree, TargetsFollowTheTree) {
  const std::vector<ShareDemand> demands = {
      demand(1, weight(1), branch(kMl, kAlice, 3)), demand(2, weight(1), branch(kMl, kAlice, 3)),
      demand(3, weight(1), branch(kMl, kBob, 3)), demand(4, weight(1), branch(kVision, kCarol, 1)),
      demand(5, ComputeShare{10, 1, Priority::kNormal}, branch(kVision, kCarol, 1))};
  const std::vector<ShareTarget> sut = share_targets(demands);

  EXPECT_DOUBLE_EQ(sut[0].fraction, 0.75 / 4);
  EXPECT_DOUBLE_EQ(sut[1].fraction, 0.75 / 4);
  EXPECT_DOUBLE_EQ(sut[2].fraction, 0.75 / 2);
  EXPECT_DOUBLE_EQ(sut[3].fraction, 0.25 - 0.10) << "what carol's capped job leaves";
  EXPECT_DOUBLE_EQ(sut[4].fraction, 0.10);
}

TEST(FairShareTree, WhatACappedGroupLeavesGoesToTheOtherGroups) {
  const std::vector<ShareDemand> demands = {
      demand(1, ComputeShare{20, 1, Priority::kNormal}, branch(kMl, kAlice, 9)),
      demand(2, weight(1), branch(kVision, kCarol, 1))};
  const std::vector<ShareTarget> sut = share_targets(demands);

  EXPECT_DOUBLE_EQ(sut[0].fraction, 0.20);
  EXPECT_DOUBLE_EQ(sut[1].fraction, 0.80);
}

}  // namespace
}  // namespace gpulimit::server
