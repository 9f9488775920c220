// What a Hello may ask for, and the one line a bad one gets back.
#include <gtest/gtest.h>

#include <cstring>

#include "gpulimit/server/loop/hello_validation.h"

namespace gpulimit::server {
namespace {

constexpr pid_t kPeer = 4242;

protocol::Hello valid_hello() {
  auto hello = protocol::make<protocol::Hello>();
  std::strcpy(hello.tenant, "train-42");
  hello.claimed_pid = kPeer;
  hello.sm_percent = 30;
  hello.weight = 2;
  hello.priority = protocol::Priority::kHigh;
  std::strcpy(hello.ledger_dir, "/dev/shm");
  hello.device_count = 2;
  hello.uuids[0][0] = 0xaa;
  hello.uuids[1][0] = 0xbb;
  return hello;
}

TEST(HelloValidation, AcceptsAWellFormedHello) {
  const Result<TenantRequest> sut = validate_hello(valid_hello(), kPeer);

  ASSERT_TRUE(sut) << sut.error();
  EXPECT_EQ(sut->tenant, "train-42");
  EXPECT_EQ(sut->share, (ComputeShare{30, 2, protocol::Priority::kHigh}));
  EXPECT_EQ(sut->ledger_dir, "/dev/shm");
  ASSERT_EQ(sut->uuids.size(), 2u);
  EXPECT_EQ(sut->uuids[1][0], 0xbb);
}

TEST(HelloValidation, AcceptsTheLimitsOfEveryRange) {
  auto hello = valid_hello();
  hello.sm_percent = 100;
  hello.weight = protocol::kMaxWeight;
  hello.device_count = shm::kBoardDevices;
  std::memset(hello.tenant, 'x', 64);

  EXPECT_TRUE(validate_hello(hello, kPeer));
  hello.sm_percent = 0;
  hello.weight = 1;
  hello.device_count = 0;
  EXPECT_TRUE(validate_hello(hello, kPeer));
}

TEST(HelloValidation, RefusesAClaimedPidThatIsNotThePeers) {
  const Result<TenantRequest> sut = validate_hello(valid_hello(), kPeer + 1);

  ASSERT_FALSE(sut);
  EXPECT_EQ(sut.error(),
            "the Hello claims pid 4242 but comes from pid 4243 (a process must introduce itself "
            "on its own connection)");
}

TEST(HelloValidation, TheJobsLeaderIsAPidWithItsStartOrNone) {
  auto hello = valid_hello();
  EXPECT_EQ(validate_hello(hello, kPeer)->leader, protocol::JobLeader{});
  hello.leader_pid = 5001;
  hello.leader_start_ticks = 777;
  EXPECT_EQ(validate_hello(hello, kPeer)->leader, (protocol::JobLeader{5001, 777}));

  for (const auto& [pid, start] : {std::pair<int32_t, uint64_t>{-1, 777}, {0, 777}, {5001, 0}}) {
    hello.leader_pid = pid;
    hello.leader_start_ticks = start;
    const Result<TenantRequest> sut = validate_hello(hello, kPeer);
    ASSERT_FALSE(sut) << pid << ":" << start;
    EXPECT_EQ(sut.error(), "the job's leader (pid " + std::to_string(pid) + ", start " +
                               std::to_string(start) + ") is not a pid with its start, nor none");
  }
}

TEST(HelloValidation, RefusalsNameTheFieldAndStayOnOneLine) {
  auto hello = valid_hello();
  std::strcpy(hello.tenant, "bad\nid");

  const Result<TenantRequest> sut = validate_hello(hello, kPeer);

  ASSERT_FALSE(sut);
  EXPECT_NE(sut.error().find("tenant id 'bad?id'"), std::string::npos) << sut.error();
  EXPECT_EQ(sut.error().find('\n'), std::string::npos);
}

TEST(HelloValidation, ATooLongTenantIdIsRefused) {
  auto hello = valid_hello();
  std::memset(hello.tenant, 'x', 65);

  EXPECT_FALSE(validate_hello(hello, kPeer));
}

TEST(HelloValidation, OtherVersionsAreNamedBoth) {
  EXPECT_EQ(other_version_refusal(7),
            "gpulimitd speaks protocol version 4 and this client version 7; use a "
            "libgpulimit.so and gpulimitd of the same release");
}

TEST(HelloValidation, PrintableCutsAndReplacesControlCharacters) {
  EXPECT_EQ(printable("a\tb\x7f"), "a?b?");
  EXPECT_EQ(printable("abcdef", 3), "abc...");
}

}  // namespace
}  // namespace gpulimit::server
