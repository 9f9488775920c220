// Each user's share of gpulimitd's connections.
#include <gtest/gtest.h>

#include "gpulimit/server/loop/connection_limits.h"

namespace gpulimit::server {
namespace {

TEST(ConnectionsPerUid, NeverMoreThanAQuarterOfWhatTheDescriptorsAllow) {
  EXPECT_EQ(connections_per_uid(kDefaultMaxConnectionsPerUid, 1'048'576),
            kDefaultMaxConnectionsPerUid);
  // (1024 - 64) / 2 descriptors a connection / 4
  EXPECT_EQ(connections_per_uid(256, 1024), 120u);
  EXPECT_EQ(connections_per_uid(16, 1024), 16u);
  EXPECT_EQ(connections_per_uid(256, 10), 1u);
  EXPECT_EQ(connections_per_uid(256, UINT64_MAX), 256u);
}

TEST(UidConnectionCounts, AUserAtItsLimitIsRefusedAndOthersAreNot) {
  UidConnectionCounts sut(2);

  EXPECT_TRUE(sut.admit(1000));
  EXPECT_TRUE(sut.admit(1000));
  EXPECT_FALSE(sut.admit(1000));
  EXPECT_TRUE(sut.admit(1001));
  EXPECT_EQ(sut.held(1000), 2u);

  sut.release(1000);
  EXPECT_TRUE(sut.admit(1000));
  // A departed process takes over its connection's count, whatever the limit.
  sut.add(1000);
  EXPECT_EQ(sut.held(1000), 3u);
  sut.release(1000);
  sut.release(1000);
  EXPECT_TRUE(sut.admit(1000));
  EXPECT_FALSE(sut.admit(1000));
}

}  // namespace
}  // namespace gpulimit::server
