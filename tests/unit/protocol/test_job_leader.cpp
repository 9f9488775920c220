// A job's leader as the CLI names it to the job (GPULIMIT_JOB_LEADER) and
// as gpulimitd tells it apart from a later process given its pid.
#include "gpulimit/protocol/job_leader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace gpulimit::protocol {
namespace {

int32_t pid_max() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  int32_t value = 0;
  in >> value;
  return value;
}

TEST(JobLeader, IsWrittenAndReadBack) {
  const JobLeader leader{4242, 987654321};
  char text[48];

  ASSERT_TRUE(format_job_leader(leader, text, sizeof text));

  EXPECT_STREQ(text, "4242:987654321");
  JobLeader read;
  ASSERT_TRUE(parse_job_leader(text, read));
  EXPECT_EQ(read, leader);
}

TEST(JobLeader, ABufferTooSmallIsRefused) {
  char text[6];
  EXPECT_FALSE(format_job_leader(JobLeader{4242, 987654321}, text, sizeof text));
}

TEST(JobLeader, AnythingButAPidAndAStartIsRefusedAndChangesNothing) {
  for (const char* text : {"", ":", "4242", "4242:", ":5", "0:5", "-1:5", "4242:0", "4242:-5",
                           "+4242:5", "4242:5:6", "4242 :5", "4242:5x", "99999999999:5",
                           "4242:99999999999999999999"}) {
    JobLeader read{7, 7};
    EXPECT_FALSE(parse_job_leader(text, read)) << text;
    EXPECT_EQ(read, (JobLeader{7, 7})) << text;
  }
}

TEST(JobLeader, TheEnvironmentsFirstValueCountsAndAMalformedOneIsNone) {
  char other[] = "GPULIMIT_JOB_LEADERX=1:1";
  char first[] = "GPULIMIT_JOB_LEADER=12:34";
  char second[] = "GPULIMIT_JOB_LEADER=56:78";
  char bad[] = "GPULIMIT_JOB_LEADER=12";
  char* envp[] = {other, first, second, nullptr};
  char* malformed[] = {bad, nullptr};
  char* none[] = {other, nullptr};

  EXPECT_EQ(job_leader_in(envp), (JobLeader{12, 34}));
  EXPECT_EQ(job_leader_in(malformed), JobLeader{});
  EXPECT_EQ(job_leader_in(none), JobLeader{});
  EXPECT_EQ(job_leader_in(nullptr), JobLeader{});
}

TEST(JobLeader, AProcessIsReadWithItsStartAndAGoneOneIsNot) {
  JobLeader self;
  ASSERT_TRUE(read_job_leader(getpid(), self));
  EXPECT_EQ(self.pid, getpid());
  EXPECT_GT(self.start_ticks, 0u);
  JobLeader again;
  ASSERT_TRUE(read_job_leader(getpid(), again));
  EXPECT_EQ(again, self) << "the start of a process never changes";

  // No process has a pid at or above pid_max.
  JobLeader gone{1, 1};
  EXPECT_FALSE(read_job_leader(pid_max(), gone));
  EXPECT_EQ(gone, (JobLeader{1, 1}));
}

}  // namespace
}  // namespace gpulimit::protocol
