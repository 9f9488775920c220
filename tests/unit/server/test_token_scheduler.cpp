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

// Tenants A and B of weight 1 wanting the device from 0, a 20 ms quantum
// and a 100 ms ack timeout: A is granted, and revoked at 20 ms.
SchedulerSettings with_ack_timeout_100ms() {
  SchedulerSettings settings = settings_with_quantum(20 * kMs);
  settings.ack_timeout_ns = 100 * kMs;
  return settings;
}
void revoke_a_at_20ms(TokenScheduler& sut) {
  sut.add_tenant(kA, weight(1));
  sut.add_tenant(kB, weight(1));
  sut.set_wanting(kA, kGpu, true, 0);
  sut.set_wanting(kB, kGpu, true, 0);
  sut.advance(20 * kMs);
}

TEST(TokenScheduler, AHolderThatNeverAcksIsForcedAfterTheAckTimeout) {
  TokenScheduler sut(with_ack_timeout_100ms());
  revoke_a_at_20ms(sut);
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

// Forced, the holder's queued kernels run on past the timeout: that time is
// charged when its processes' late Acks come, as if it had held the token.
TEST(TokenScheduler, AForcedHoldersLateDrainIsChargedToItsShare) {
  TokenScheduler sut(with_ack_timeout_100ms());
  revoke_a_at_20ms(sut);
  sut.advance(120 * kMs);
  ASSERT_EQ(sut.take_changes(),
            (std::vector{granted(kA), revoked(kA, Reason::kQuantumEnd),
                         released(kA, Reason::kAckTimeout, 120 * kMs), granted(kB)}));
  sut.set_wanting(kA, kGpu, true, 120 * kMs);

  sut.late_drained(kA, kGpu, 200 * kMs);
  sut.advance(300 * kMs);

  // A is charged 200 ms (120 held, 80 drained late): B, charged from 120 ms,
  // keeps the token until it has 200 ms too, not only until 240 ms.
  EXPECT_TRUE(sut.take_changes().empty());
  EXPECT_EQ(sut.statistics(kA, kGpu, 300 * kMs).overrun_ns, 80 * kMs);
  sut.advance(340 * kMs);
  EXPECT_EQ(sut.take_changes(), std::vector{revoked(kB, Reason::kQuantumEnd)});
}

TEST(TokenScheduler, AForcedHoldersNextGrantSettlesItsOverrunOnce) {
  TokenScheduler sut(with_ack_timeout_100ms());
  revoke_a_at_20ms(sut);
  sut.advance(120 * kMs);  // A forced, B granted
  sut.set_wanting(kA, kGpu, true, 120 * kMs);
  // B keeps the token quantum after quantum until it has held what A has.
  for (TimeNs t = 140 * kMs; t <= 240 * kMs; t += 20 * kMs)
    sut.advance(t);
  sut.holder_drained(kB, kGpu, 241 * kMs);
  sut.take_changes();
  ASSERT_EQ(sut.holder(kGpu), kA);

  sut.late_drained(kA, kGpu, 250 * kMs);  // after its grant: settled already

  EXPECT_EQ(sut.statistics(kA, kGpu, 250 * kMs).overrun_ns, 121 * kMs);
}

// A lone capped tenant whose kernels outlast the ack timeout: the drain
// after it is paid from its budget, and it waits until that debt is paid.
TEST(TokenScheduler, ACappedTenantsLateDrainIsDebt) {
  SchedulerSettings settings = settings_with_quantum(20 * kMs);
  settings.ack_timeout_ns = 100 * kMs;
  settings.cap_window_ns = 100 * kMs;
  TokenScheduler sut(settings);
  sut.add_tenant(kA, capped(30));
  sut.set_wanting(kA, kGpu, true, 0);
  // A slice (20 ms) to start with, spent at 70 % of wall time: at 28.6 ms.
  const TimeNs spent = *sut.next_deadline(0);
  ASSERT_NEAR(spent, 28'571'429, 1);
  sut.advance(spent);
  const TimeNs forced = spent + 100 * kMs;
  sut.advance(forced);
  ASSERT_EQ(sut.take_changes(), (std::vector{granted(kA), revoked(kA, Reason::kCapSpent),
                                             released(kA, Reason::kAckTimeout, forced)}));
  sut.set_wanting(kA, kGpu, true, forced);

  // Draining, its budget falls as if held: no grant on its way back up.
  sut.advance(forced + 300 * kMs);
  EXPECT_TRUE(sut.take_changes().empty());
  sut.late_drained(kA, kGpu, forced + 400 * kMs);

  // -70 ms at the forced release, -350 ms after 400 ms more held: a slice
  // (20 ms) is back after 370 / 0.3 = 1233 ms more.
  const TimeNs back = forced + 400 * kMs + 1'233'333'334;
  EXPECT_NEAR(static_cast<double>(*sut.next_deadline(forced + 400 * kMs)),
              static_cast<double>(back), 10.0);  // integer rounding
  sut.advance(back - kMs);
  EXPECT_TRUE(sut.take_changes().empty());
  sut.advance(back + kMs);
  EXPECT_EQ(sut.take_changes(), std::vector{granted(kA)});
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
