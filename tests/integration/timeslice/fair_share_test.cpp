// Fair share between groups and users end to end: a system gpulimitd with a
// policy of group and user shares, spinner tenants of several uids and gids
// (each started under setpriv) on one simulated GPU, the simulator's trace
// as the truth. What the scheduler promises with explicit time
// (tests/unit/server/test_fair_share_tree.cpp) must hold with real
// processes, real handoffs and the kernel's identities.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/protocol/status_json.h"
#include "time_slicing.h"

namespace integration {
namespace {

// Users and groups without accounts: policy and scheduler know them by number.
constexpr uid_t kAlice = 60101;
constexpr uid_t kBob = 60102;
constexpr uid_t kCarol = 60103;
constexpr gid_t kMl = 60201;
constexpr gid_t kVision = 60202;

class FairSharing : public TimeSlicing {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "tenants of several users need root to start";
  }

  // A system server (tenants of every uid) with `policy`; the test's
  // directories opened to those uids as a machine's would be.
  void start_system_server(const std::string& policy) {
    ASSERT_EQ(::chmod(sockets_.path().c_str(), 0755), 0);
    ASSERT_EQ(::chmod(ledgers_.path().c_str(), 01777), 0);
    ASSERT_EQ(::chmod(machine_.directory().c_str(), 0777), 0);
    // The trace is appended to by every tenant, whoever creates it.
    std::ofstream(machine_trace_path()).flush();
    ASSERT_EQ(::chmod(machine_trace_path().c_str(), 0666), 0);
    policy_path_ = sockets_.path() + "/policy.toml";
    std::ofstream(policy_path_) << policy;
    ASSERT_NO_FATAL_FAILURE(start_server({"--system", "--policy", policy_path_, "--watch", "off",
                                          "--metrics-address", "off", "--cross-check-ms", "0"}));
  }

  // A spinner tenant run as `uid` in group `gid` only.
  void start_as(const std::string& name, uid_t uid, gid_t gid, double seconds = 5.6) {
    start_tenant(name, {"--weight", "1"}, spinning_for(seconds),
                 {"/usr/bin/setpriv", "--reuid=" + std::to_string(uid),
                  "--regid=" + std::to_string(gid), "--clear-groups"});
  }

  static std::string group(gid_t gid, int share) {
    return "[groups.\"" + std::to_string(gid) + "\"]\nshare = " + std::to_string(share) + "\n";
  }
  static std::string user(uid_t uid, int share) {
    return "[users.\"" + std::to_string(uid) + "\"]\nshare = " + std::to_string(share) + "\n";
  }

  // `gpulimit status --json`, read by the schema's own reader.
  gpulimit::protocol::status::Report status() {
    WorkloadProcess cli(kCli, {"status", "--json"},
                        with(machine_.environment(), "GPULIMIT_SOCKET", socket_path()));
    const WorkloadRun run = cli.wait(std::chrono::seconds(30));
    gpulimit::protocol::status::Report report;
    std::string error;
    EXPECT_TRUE(gpulimit::protocol::status::parse_status_report(run.out, report, error))
        << error << "\n"
        << run.describe();
    return report;
  }

  std::string policy_path_;
};

TEST_F(FairSharing, TwoGroupsOfUnequalSizeSplitByTheirShares) {
  // ml (share 3): alice's one job. vision (share 1): bob's and carol's.
  ASSERT_NO_FATAL_FAILURE(start_system_server(group(kMl, 3) + group(kVision, 1)));
  start_as("alice", kAlice, kMl);
  start_as("bob", kBob, kVision);
  start_as("carol", kCarol, kVision);
  // The tree as status shows it, while they run.
  std::map<uid_t, gpulimit::protocol::status::Tenant> by_uid;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       by_uid.size() < 3 && std::chrono::steady_clock::now() < until;) {
    by_uid.clear();
    for (const auto& tenant : status().tenants)
      by_uid[tenant.uid] = tenant;
  }
  ASSERT_NO_FATAL_FAILURE(finish_tenants());
  ASSERT_EQ(by_uid.size(), 3u) << "status never showed the three tenants";
  EXPECT_EQ(by_uid[kAlice].gid, kMl);
  EXPECT_EQ(by_uid[kAlice].group, std::to_string(kMl)) << "a gid without a name, as a number";
  EXPECT_EQ(by_uid[kAlice].group_share, 3u);
  EXPECT_EQ(by_uid[kBob].gid, kVision);
  EXPECT_EQ(by_uid[kCarol].group_share, 1u);
  EXPECT_EQ(by_uid[kCarol].user_share, 1u);

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  EXPECT_NEAR(gpu_share(report, "alice"), 0.75, kTolerance);
  EXPECT_NEAR(gpu_share(report, "bob"), 0.125, kTolerance);
  EXPECT_NEAR(gpu_share(report, "carol"), 0.125, kTolerance);
  expect_time_sliced(report);
}

TEST_F(FairSharing, AUserWithManyJobsGetsOneUsersShare) {
  ASSERT_NO_FATAL_FAILURE(start_system_server(""));
  for (const char* job : {"alice-1", "alice-2", "alice-3"})
    start_as(job, kAlice, kMl);
  start_as("bob", kBob, kMl);
  ASSERT_NO_FATAL_FAILURE(finish_tenants());

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  EXPECT_NEAR(gpu_share(report, "bob"), 0.5, kTolerance) << "one job against three";
  for (const char* job : {"alice-1", "alice-2", "alice-3"})
    EXPECT_NEAR(gpu_share(report, job), 0.5 / 3, kTolerance) << job;
  expect_time_sliced(report);
}

TEST_F(FairSharing, UserSharesSplitTheirGroupsTime) {
  ASSERT_NO_FATAL_FAILURE(start_system_server(user(kAlice, 3) + user(kBob, 1)));
  start_as("alice", kAlice, kMl);
  start_as("bob", kBob, kMl);
  ASSERT_NO_FATAL_FAILURE(finish_tenants());

  const auto report = analyze_tenants();
  ASSERT_GE(report.window.length_ns(), 4000 * kMillisecond);
  EXPECT_NEAR(gpu_share(report, "alice"), 0.75, kTolerance);
  EXPECT_NEAR(gpu_share(report, "bob"), 0.25, kTolerance);
}

// With a usage history, a group that had the GPU to itself gets less than
// half once another comes, and the shares even out as the history decays.
TEST_F(FairSharing, AGroupThatUsedTheGpuAloneYieldsToOneThatDidNot) {
  ASSERT_NO_FATAL_FAILURE(start_system_server("[fair_share]\nhalf_life = 2\n"));
  start_as("ml", kAlice, kMl, 8.5);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // ml alone: history to pay for
  start_as("vision", kCarol, kVision, 5.0);
  ASSERT_NO_FATAL_FAILURE(finish_tenants());

  trace_ = trace();
  map_ = tenant_map(trace_);
  int64_t vision_start = 0;
  for (const auto& kernel : trace_.kernels)
    if (map_["vision"].contains(kernel.pid) &&
        (vision_start == 0 || kernel.start_ns < vision_start))
      vision_start = kernel.start_ns;
  ASSERT_GT(vision_start, 0) << "vision never ran";
  const auto first = gpulimit::trace::analyze(trace_, {.device = 0,
                                                       .from_ns = vision_start,
                                                       .to_ns = vision_start + 1500 * kMillisecond,
                                                       .tenants = map_});
  const auto later =
      gpulimit::trace::analyze(trace_, {.device = 0,
                                        .from_ns = vision_start + 3000 * kMillisecond,
                                        .to_ns = vision_start + 4500 * kMillisecond,
                                        .tenants = map_});
  std::printf("[ measured ] vision's share: %.3f in its first 1.5 s, %.3f 3 s later\n",
              gpu_share(first, "vision"), gpu_share(later, "vision"));

  // Without history both would get half from the start (the other tests).
  EXPECT_GT(gpu_share(first, "vision"), 0.6) << "ml's three seconds alone count against it";
  EXPECT_LT(gpu_share(later, "vision"), gpu_share(first, "vision")) << "and decay";
}

}  // namespace
}  // namespace integration
