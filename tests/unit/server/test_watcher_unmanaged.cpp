// The record of GPU processes that run without gpulimit
// (watcher_unmanaged.h), with the machine replaced by a probe of the test's.
#include <gtest/gtest.h>

#include <set>

#include "gpulimit/server/watcher/watcher_unmanaged.h"

namespace gpulimit::server {
namespace {

// A made-up machine: which pids run (with their start), which have
// libgpulimit.so mapped, and who was killed.
struct FakeMachine {
  std::map<pid_t, uint64_t> running;
  std::set<pid_t> preloaded;
  std::vector<pid_t> killed;

  ProcessProbe probe() {
    return ProcessProbe{[this](pid_t pid) { return preloaded.contains(pid); },
                        [this](pid_t pid, uint64_t start) {
                          const auto found = running.find(pid);
                          return found != running.end() && (start == 0 || found->second == start);
                        },
                        [this](pid_t pid, uint64_t start) {
                          const auto found = running.find(pid);
                          if (found == running.end() || found->second != start) return false;
                          killed.push_back(pid);
                          running.erase(found);
                          return true;
                        },
                        [](uid_t uid) { return "user" + std::to_string(uid); }};
  }
};

UnmanagedSighting sighting(pid_t pid, uint64_t start, uid_t uid = 1000, gid_t gid = 100) {
  return UnmanagedSighting{pid, uid, gid, start, "python3", "/dev/nvidia0"};
}

WatcherConfig config(UnmanagedAction action, UnmanagedPolicy policy = {}) {
  WatcherConfig watcher;
  watcher.unmanaged_default = action;
  watcher.unmanaged_policy = std::move(policy);
  return watcher;
}

TEST(UnmanagedProcesses, RecordsAndCountsAProcessOnce) {
  FakeMachine machine;
  machine.running = {{42, 7}};
  UnmanagedProcesses sut(config(UnmanagedAction::kWarn), machine.probe(), std::nullopt);

  sut.sighted(sighting(42, 7), 0);
  auto again = sighting(42, 7);
  again.device = "/dev/nvidiactl";
  sut.sighted(again, 1);

  EXPECT_EQ(sut.seen(), 1u);
  ASSERT_EQ(sut.list().size(), 1u);
  EXPECT_EQ(sut.list()[0].pid, 42);
  EXPECT_EQ(sut.list()[0].user, "user1000");
  EXPECT_EQ(sut.list()[0].command, "python3");
  EXPECT_EQ(sut.list()[0].device, "/dev/nvidia0") << "the first sighting is kept";
  EXPECT_TRUE(machine.killed.empty()) << "warn kills nothing";
}

TEST(UnmanagedProcesses, KillSendsTheOffenderAloneAway) {
  FakeMachine machine;
  machine.running = {{42, 7}, {43, 8}};
  UnmanagedProcesses sut(config(UnmanagedAction::kKill), machine.probe(), std::nullopt);

  sut.sighted(sighting(42, 7), 0);

  EXPECT_EQ(machine.killed, std::vector<pid_t>{42});
  EXPECT_TRUE(machine.running.contains(43));
  EXPECT_EQ(sut.seen(), 1u);
}

TEST(UnmanagedProcesses, NeverKillsALaterProcessThatGotThePid) {
  FakeMachine machine;
  machine.running = {{42, 99}};  // started after the one that was seen
  UnmanagedProcesses sut(config(UnmanagedAction::kKill), machine.probe(), std::nullopt);

  sut.sighted(sighting(42, 7), 0);

  EXPECT_TRUE(machine.killed.empty());
  EXPECT_TRUE(machine.running.contains(42));
}

TEST(UnmanagedProcesses, ThePolicyDecidesPerUserAndGroup) {
  FakeMachine machine;
  machine.running = {{42, 7}, {43, 8}};
  UnmanagedProcesses sut(config(UnmanagedAction::kWarn,
                                [](uid_t uid, gid_t gid) {
                                  return uid == 2000 && gid == 200 ? UnmanagedAction::kKill
                                                                   : UnmanagedAction::kAllow;
                                }),
                         machine.probe(), std::nullopt);

  sut.sighted(sighting(42, 7, 1000, 100), 0);
  sut.sighted(sighting(43, 8, 2000, 200), 0);

  EXPECT_EQ(machine.killed, std::vector<pid_t>{43});
  ASSERT_EQ(sut.list().size(), 2u);
  EXPECT_EQ(sut.list()[0].action, UnmanagedAction::kAllow);
  EXPECT_EQ(sut.list()[1].action, UnmanagedAction::kKill);
}

TEST(UnmanagedProcesses, AProcessUnderTheLibraryGetsTimeToJoin) {
  FakeMachine machine;
  machine.running = {{42, 7}, {43, 8}};
  machine.preloaded = {42, 43};
  UnmanagedProcesses sut(config(UnmanagedAction::kKill), machine.probe(), std::nullopt);
  sut.sighted(sighting(42, 7), 0);
  sut.sighted(sighting(43, 8), 0);
  ASSERT_EQ(sut.next_deadline(), kJoinGraceNs);

  sut.joined(42);
  sut.advance(kJoinGraceNs - 1);
  EXPECT_EQ(sut.seen(), 0u) << "still within its grace";
  sut.advance(kJoinGraceNs);

  EXPECT_EQ(sut.seen(), 1u);
  EXPECT_EQ(machine.killed, std::vector<pid_t>{43}) << "42 joined in time; 43 never did";
  EXPECT_FALSE(sut.next_deadline());
}

TEST(UnmanagedProcesses, APerUserServerLooksAtItsOwnUserOnly) {
  FakeMachine machine;
  machine.running = {{42, 7}, {43, 8}};
  UnmanagedProcesses sut(config(UnmanagedAction::kKill), machine.probe(), uid_t{1000});

  sut.sighted(sighting(42, 7, 1000), 0);
  sut.sighted(sighting(43, 8, 2000), 0);

  EXPECT_EQ(machine.killed, std::vector<pid_t>{42});
  EXPECT_EQ(sut.seen(), 1u);
}

TEST(UnmanagedProcesses, ForgetsProcessesThatExitedButKeepsTheCount) {
  FakeMachine machine;
  machine.running = {{42, 7}, {43, 8}};
  UnmanagedProcesses sut(config(UnmanagedAction::kWarn), machine.probe(), std::nullopt);
  sut.sighted(sighting(42, 7), 0);
  sut.sighted(sighting(43, 8), 0);

  machine.running.erase(42);
  sut.forget_gone();

  ASSERT_EQ(sut.list().size(), 1u);
  EXPECT_EQ(sut.list()[0].pid, 43);
  EXPECT_EQ(sut.seen(), 2u);
}

TEST(UnmanagedProcesses, ALaterProcessWithTheSamePidCountsAgain) {
  FakeMachine machine;
  machine.running = {{42, 7}};
  UnmanagedProcesses sut(config(UnmanagedAction::kWarn), machine.probe(), std::nullopt);
  sut.sighted(sighting(42, 7), 0);

  machine.running[42] = 9;
  sut.sighted(sighting(42, 9), 1);

  EXPECT_EQ(sut.seen(), 2u);
  EXPECT_EQ(sut.list().size(), 1u);
}

}  // namespace
}  // namespace gpulimit::server
