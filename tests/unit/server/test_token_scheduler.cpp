// The scheduling rules, driven with made-up times: no clock, no sleeping.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <vector>

#include "busy_tenants.h"
#include "gpulimit/server/scheduling/token_scheduler.h"

namespace gpulimit::server {
namespace {

using Kind = TokenChange::Kind;
using Reason = TokenChange::Reason;
using protocol::Priority;

constexpr TimeNs kMs = kNsPerMs;
constexpr TimeNs kUs = 1'000;
constexpr TenantNumber kA = 1;
constexpr TenantNumber kB = 2;
constexpr TenantNumber kC = 3;

SchedulerSettings settings_with_quantum(TimeNs quantum) {
  SchedulerSettings settings;
  settings.quantum_ns = quantum;
  settings.ack_timeout_ns = default_ack_timeout(quantum);
  return settings;
}

ComputeShare weight(uint32_t w) {
  return ComputeShare{0, w, Priority::kNormal};
}
ComputeShare capped(uint32_t percent) {
  return ComputeShare{percent, 1, Priority::kNormal};
}
ComputeShare priority(Priority p) {
  return ComputeShare{0, 1, p};
}

TokenChange granted(TenantNumber t) {
  return TokenChange{Kind::kGrant, kGpu, t};
}
TokenChange revoked(TenantNumber t, Reason reason) {
  return TokenChange{Kind::kRevoke, kGpu, t, reason};
}
TokenChange released(TenantNumber t, Reason reason, TimeNs held) {
  return TokenChange{Kind::kRelease, kGpu, t, reason, held};
}

TEST(TokenScheduler, ALoneTenantWithoutCapKeepsTheTokenForever) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));

  sut.set_wanting(kA, kGpu, true, 0);
  sut.advance(3'600'000 * kMs);

  EXPECT_EQ(sut.take_changes(), std::vector{granted(kA)});
  EXPECT_EQ(sut.holder(kGpu), kA);
  EXPECT_FALSE(sut.next_deadline(3'600'000 * kMs)) << "no timer runs for a lone holder";
}

TEST(TokenScheduler, AWaiterGetsTheTokenAfterTheHoldersQuantumAndDrain) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);

  sut.set_wanting(kB, kGpu, true, 5 * kMs);
  EXPECT_EQ(sut.waiting(kGpu), 1u);
  EXPECT_EQ(sut.next_deadline(5 * kMs), 20 * kMs);
  sut.advance(20 * kMs);
  sut.holder_drained(kA, kGpu, 21 * kMs);

  EXPECT_EQ(sut.take_changes(),
            (std::vector{granted(kA), revoked(kA, Reason::kQuantumEnd),
                         released(kA, Reason::kDrained, 21 * kMs), granted(kB)}));
  EXPECT_EQ(sut.waiting(kGpu), 0u);
}

TEST(TokenScheduler, AWaiterAfterALongLoneHoldWaitsOneQuantumAtMost) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);
  const TimeNs arrival = 10'000 * kMs;

  sut.set_wanting(kB, kGpu, true, arrival);
  sut.advance(arrival + 20 * kMs);

  EXPECT_EQ(sut.take_changes(), (std::vector{granted(kA), revoked(kA, Reason::kQuantumEnd)}));
}

TEST(TokenScheduler, WeightsShareTheDeviceInProportion) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  BusyTenants tenants(sut, 100 * kUs);

  tenants.start({{kA, weight(3)}, {kB, weight(1)}});
  tenants.run_until(20'000 * kMs);

  const double total = static_cast<double>(tenants.held(kA) + tenants.held(kB));
  EXPECT_NEAR(tenants.held(kA) / total, 0.75, 0.01);
  EXPECT_NEAR(tenants.held(kB) / total, 0.25, 0.01);
  EXPECT_GT(total / static_cast<double>(tenants.now()), 0.98) << "the device stays busy";
}

TEST(TokenScheduler, EqualTenantsAlternateOneQuantumEach) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  BusyTenants tenants(sut, 0);

  tenants.start({{kA, weight(1)}, {kB, weight(1)}, {kC, weight(1)}});
  tenants.run_until(590 * kMs);

  EXPECT_EQ(tenants.grants(kA), 10);
  EXPECT_EQ(tenants.grants(kB), 10);
  EXPECT_EQ(tenants.grants(kC), 10);
}

TEST(TokenScheduler, AHardCapHoldsALoneTenantToItsShare) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  BusyTenants tenants(sut, 200 * kUs);

  tenants.start({{kA, capped(30)}});
  tenants.run_until(10'000 * kMs);

  EXPECT_NEAR(static_cast<double>(tenants.held(kA)) / tenants.now(), 0.30, 0.01);
}

TEST(TokenScheduler, ACappedTenantLeavesTheRestToAnUncappedOne) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  BusyTenants tenants(sut, 100 * kUs);

  tenants.start({{kA, capped(20)}, {kB, weight(1)}});
  tenants.run_until(10'000 * kMs);

  EXPECT_NEAR(static_cast<double>(tenants.held(kA)) / tenants.now(), 0.20, 0.01);
  EXPECT_NEAR(static_cast<double>(tenants.held(kB)) / tenants.now(), 0.80, 0.02);
}

TEST(TokenScheduler, TheCapRevokesEvenWhenNobodyElseWaits) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, capped(50));

  sut.set_wanting(kA, kGpu, true, 0);
  // It starts with one slice (20 ms) and accrues 50 % while holding: spent at 40 ms.
  ASSERT_EQ(sut.next_deadline(0), 40 * kMs);
  sut.advance(40 * kMs);

  EXPECT_EQ(sut.take_changes(), (std::vector{granted(kA), revoked(kA, Reason::kCapSpent)}));
}

TEST(TokenScheduler, ACappedWaiterIsWokenWhenItsBudgetHasGrownBack) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, capped(50));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.advance(40 * kMs);  // A's budget is spent
  sut.holder_drained(kA, kGpu, 40 * kMs);
  sut.set_wanting(kB, kGpu, true, 41 * kMs);
  sut.set_wanting(kA, kGpu, true, 41 * kMs);
  sut.take_changes();
  ASSERT_EQ(sut.holder(kGpu), kB);

  // B holds alone (no quantum) until A has a slice again: 20 ms at 50 %.
  const auto deadline = sut.next_deadline(41 * kMs);
  ASSERT_EQ(deadline, 80 * kMs);
  sut.advance(*deadline);
  // Contention starts. B came in at A's vtime (a newcomer earns no credit
  // from the device being free a moment) and has held 39 ms since, a
  // quantum and more: A goes next, at once.
  EXPECT_EQ(sut.take_changes(), std::vector{revoked(kB, Reason::kQuantumEnd)});
}

TEST(TokenScheduler, AWaiterThatLeavesIsForgotten) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 0);

  sut.leave_device(kB, kGpu, 5 * kMs);
  sut.advance(20 * kMs);

  EXPECT_EQ(sut.waiting(kGpu), 0u);
  EXPECT_EQ(sut.take_changes(), std::vector{granted(kA)}) << "no quantum without a waiter";
}

TEST(TokenScheduler, DevicesAreScheduledIndependently) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));

  sut.set_wanting(kA, 0, true, 0);
  sut.set_wanting(kB, 1, true, 0);

  EXPECT_EQ(sut.holder(0), kA);
  EXPECT_EQ(sut.holder(1), kB);
  EXPECT_FALSE(sut.next_deadline(0));
}

TEST(TokenScheduler, OverrunIsChargedAsDebt) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 0);
  sut.advance(20 * kMs);
  sut.holder_drained(kA, kGpu, 35 * kMs);  // 15 ms past the quantum
  sut.set_wanting(kA, kGpu, true, 35 * kMs);
  sut.take_changes();

  // B is charged 20 ms a quantum; it keeps the token until it has held more
  // than A's 35 ms, i.e. for two quanta.
  sut.advance(55 * kMs);
  EXPECT_TRUE(sut.take_changes().empty()) << "B keeps the token past its first quantum";
  sut.advance(75 * kMs);

  EXPECT_EQ(sut.take_changes(), std::vector{revoked(kB, Reason::kQuantumEnd)});
}

TEST(TokenScheduler, AHigherPriorityWaiterGoesFirstAtTheQuantumEnd) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, priority(Priority::kNormal));
  sut.add_tenant(kB, priority(Priority::kNormal));
  sut.add_tenant(kC, priority(Priority::kHigh));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 1 * kMs);
  sut.set_wanting(kC, kGpu, true, 2 * kMs);

  sut.advance(19 * kMs);
  EXPECT_EQ(sut.holder(kGpu), kA) << "no preemption inside a quantum";
  sut.advance(20 * kMs);
  sut.holder_drained(kA, kGpu, 20 * kMs);

  EXPECT_EQ(sut.holder(kGpu), kC);
}

TEST(TokenScheduler, AHighPriorityHolderKeepsTheTokenFromLowerOnes) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  BusyTenants tenants(sut, 100 * kUs);

  tenants.start({{kA, priority(Priority::kHigh)}, {kB, priority(Priority::kLow)}});
  tenants.run_until(1'000 * kMs);

  EXPECT_EQ(tenants.held(kB), 0);
  EXPECT_EQ(tenants.grants(kA), 1) << "kept without a single handoff";
}

TEST(TokenScheduler, AnIdleHolderGivesTheTokenBackAtOnceWhenOthersWait) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 1 * kMs);

  sut.holder_idle(kA, kGpu, 3 * kMs);

  EXPECT_EQ(sut.take_changes(), (std::vector{granted(kA), revoked(kA, Reason::kIdle)}));
}

TEST(TokenScheduler, AnIdleLoneHolderKeepsTheTokenUntilSomebodyWaits) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);

  sut.holder_idle(kA, kGpu, 3 * kMs);
  EXPECT_EQ(sut.take_changes(), std::vector{granted(kA)});
  sut.set_wanting(kB, kGpu, true, 50 * kMs);

  EXPECT_EQ(sut.take_changes(), std::vector{revoked(kA, Reason::kIdle)});
}

TEST(TokenScheduler, AHolderThatNeverAcksIsForcedAfterTheAckTimeout) {
  SchedulerSettings settings = settings_with_quantum(20 * kMs);
  settings.ack_timeout_ns = 100 * kMs;
  TokenScheduler sut(settings);
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 0);
  sut.advance(20 * kMs);
  sut.take_changes();

  EXPECT_EQ(sut.next_deadline(20 * kMs), 120 * kMs);
  sut.advance(119 * kMs);
  EXPECT_TRUE(sut.take_changes().empty());
  sut.advance(120 * kMs);

  EXPECT_EQ(sut.take_changes(),
            (std::vector{released(kA, Reason::kAckTimeout, 120 * kMs), granted(kB)}));
  sut.holder_drained(kA, kGpu, 130 * kMs);  // too late: ignored
  EXPECT_EQ(sut.holder(kGpu), kB);
  EXPECT_TRUE(sut.take_changes().empty());
}

TEST(TokenScheduler, AHolderThatLeavesMidQuantumHandsOverAtOnce) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 0);
  sut.take_changes();

  sut.remove_tenant(kA, 7 * kMs);

  EXPECT_EQ(sut.take_changes(),
            (std::vector{released(kA, Reason::kHolderLeft, 7 * kMs), granted(kB)}));
}

TEST(TokenScheduler, AHolderThatLeavesMidDrainHandsOverAtOnce) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 0);
  sut.advance(20 * kMs);
  sut.take_changes();

  sut.leave_device(kA, kGpu, 25 * kMs);

  EXPECT_EQ(sut.take_changes(),
            (std::vector{released(kA, Reason::kHolderLeft, 25 * kMs), granted(kB)}));
}

TEST(TokenScheduler, IdlingEarnsNoCredit) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  BusyTenants tenants(sut, 0);
  tenants.start({{kA, weight(1)}});
  tenants.run_until(10'000 * kMs);  // A alone for 10 s

  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kB, kGpu, true, tenants.now());
  const TimeNs a_before = tenants.held(kA);
  tenants.run_until(tenants.now() + 1'000 * kMs);

  // B came back with A's vtime, not with 10 s of credit: they split the second.
  EXPECT_NEAR(static_cast<double>(tenants.held(kB)) / (1'000 * kMs), 0.5, 0.05);
  EXPECT_NEAR(static_cast<double>(tenants.held(kA) - a_before) / (1'000 * kMs), 0.5, 0.05);
}

TEST(TokenScheduler, DeadlinesAlwaysLieAhead) {
  TokenScheduler sut(settings_with_quantum(5 * kMs));
  std::mt19937 random(7);
  BusyTenants tenants(sut, 300 * kUs);
  std::map<TenantNumber, ComputeShare> mix;
  for (TenantNumber t = 1; t <= 12; ++t)
    mix[t] =
        ComputeShare{t % 3 == 0 ? 10 * (t % 7 + 1) : 0, static_cast<uint32_t>(1 + random() % 10),
                     static_cast<Priority>(static_cast<int32_t>(random() % 3) - 1)};

  tenants.start(mix);
  tenants.run_until(3'000 * kMs);  // asserts every deadline is after its time

  EXPECT_GT(tenants.now(), 0);
}

TEST(TokenScheduler, TargetsFollowWeightsCapsAndPriority) {
  TokenScheduler sut(settings_with_quantum(20 * kMs));
  sut.add_tenant(kA, weight(3));
  sut.add_tenant(kB, weight(1));
  sut.add_tenant(kC, capped(10));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 0);
  sut.set_wanting(kC, kGpu, true, 0);

  EXPECT_DOUBLE_EQ(sut.figures(kC, kGpu, 0).share_target, 0.10);
  EXPECT_DOUBLE_EQ(sut.figures(kA, kGpu, 0).share_target, 0.675);
  EXPECT_DOUBLE_EQ(sut.figures(kB, kGpu, 0).share_target, 0.225);
}

TEST(TokenScheduler, FiguresCountHeldTimeAndRecentShare) {
  SchedulerSettings settings = settings_with_quantum(20 * kMs);
  settings.share_window_ns = 1'000 * kMs;
  TokenScheduler sut(settings);
  BusyTenants tenants(sut, 0);
  tenants.start({{kA, weight(1)}, {kB, weight(1)}});

  tenants.run_until(4'000 * kMs);
  const DeviceShareFigures a = sut.figures(kA, kGpu, tenants.now());

  EXPECT_NEAR(static_cast<double>(a.held_ns), 2'000.0 * kMs, 20.0 * kMs);
  EXPECT_NEAR(a.share_achieved, 0.5, 0.03);
  EXPECT_DOUBLE_EQ(a.share_target, 0.5);
}

}  // namespace
}  // namespace gpulimit::server
