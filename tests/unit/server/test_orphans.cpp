// Orphans (loop/orphans.h): which leaders count as exited when a tenant is
// created, and the deadlines of orphans to be killed. The leader's exit
// seen through its pidfd, and the kill, are tested with real jobs
// (tests/integration/cli/orphans_test.cpp).
#include "gpulimit/server/loop/orphans.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <vector>

namespace gpulimit::server {
namespace {

constexpr TimeNs kSecond = 1000 * kNsPerMs;

protocol::JobLeader self() {
  protocol::JobLeader leader;
  EXPECT_TRUE(protocol::read_job_leader(getpid(), leader));
  return leader;
}

int32_t pid_max() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  int32_t value = 0;
  in >> value;
  return value;
}

class OrphansTest : public testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<EventLoop>> created = EventLoop::create();
    ASSERT_TRUE(created.ok());
    loop_ = std::move(*created);
    sut_ = std::make_unique<Orphans>(*loop_,
                                     [this](TenantNumber tenant) { orphaned_.push_back(tenant); });
  }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Orphans> sut_;
  std::vector<TenantNumber> orphaned_;
};

TEST_F(OrphansTest, ALeaderThatRunsIsWatchedAndNoOrphan) {
  sut_->watch(1, self(), 10 * kSecond);

  ASSERT_TRUE(sut_->status(1));
  EXPECT_EQ(sut_->status(1)->leader, getpid());
  EXPECT_FALSE(sut_->status(1)->orphaned_at);
  EXPECT_TRUE(orphaned_.empty());
  EXPECT_EQ(sut_->orphan_count(), 0u);
}

TEST_F(OrphansTest, ATenantThatNamesNoLeaderIsNotWatched) {
  sut_->watch(1, protocol::JobLeader{}, 10 * kSecond);

  EXPECT_FALSE(sut_->status(1));
  EXPECT_TRUE(orphaned_.empty());
}

TEST_F(OrphansTest, ALeaderAlreadyGoneMakesAnOrphanAtOnce) {
  sut_->watch(1, protocol::JobLeader{pid_max(), 12345}, 10 * kSecond);

  EXPECT_EQ(orphaned_, std::vector<TenantNumber>{1});
  ASSERT_TRUE(sut_->status(1));
  EXPECT_EQ(sut_->status(1)->orphaned_at, 10 * kSecond);
  EXPECT_EQ(sut_->orphan_count(), 1u);
}

TEST_F(OrphansTest, APidTakenByAnotherProcessIsNotTheLeader) {
  // This process has the pid, but started at another time than named.
  protocol::JobLeader earlier = self();
  earlier.start_ticks -= 1;

  sut_->watch(1, earlier, 10 * kSecond);

  EXPECT_EQ(orphaned_, std::vector<TenantNumber>{1});
}

TEST_F(OrphansTest, ATenantsFirstLeaderCountsAndForgettingEndsTheWatch) {
  sut_->watch(1, self(), 10 * kSecond);
  sut_->watch(1, protocol::JobLeader{pid_max(), 1}, 11 * kSecond);
  EXPECT_TRUE(orphaned_.empty()) << "a second leader for the same tenant is ignored";

  sut_->forget(1);

  EXPECT_FALSE(sut_->status(1));
}

TEST_F(OrphansTest, AnOrphanToBeKilledIsDueOnceAtItsDeadline) {
  sut_->watch(1, protocol::JobLeader{pid_max(), 1}, 10 * kSecond);
  sut_->watch(2, protocol::JobLeader{pid_max(), 2}, 10 * kSecond);
  sut_->watch(3, self(), 10 * kSecond);
  sut_->end_at(1, 12 * kSecond);
  sut_->end_at(2, 11 * kSecond);
  sut_->end_at(3, 11 * kSecond);  // no orphan: never due

  EXPECT_EQ(sut_->next_deadline(), 11 * kSecond);
  EXPECT_TRUE(sut_->due(11 * kSecond - 1).empty());
  EXPECT_EQ(sut_->due(11 * kSecond), std::vector<TenantNumber>{2});
  EXPECT_TRUE(sut_->status(2)->killed);
  EXPECT_EQ(sut_->next_deadline(), 12 * kSecond);
  EXPECT_EQ(sut_->due(20 * kSecond), std::vector<TenantNumber>{1});
  EXPECT_TRUE(sut_->due(30 * kSecond).empty());
  EXPECT_FALSE(sut_->next_deadline());
  EXPECT_FALSE(sut_->status(3)->killed);
}

}  // namespace
}  // namespace gpulimit::server
