// What gpulimitd records of its tenants (usage_recorder.h), with explicit
// time: GPU time as the scheduler counts it, memory integrated between
// samples and its sampled peak, a record closed when its tenant goes, and
// only what changed saved.
#include <gtest/gtest.h>

#include "gpulimit/server/accounting/usage_recorder.h"
#include "gpulimit/testing/temporary_directory.h"

namespace {

using gpulimit::server::TimeNs;
using gpulimit::server::UsageRecorder;
using gpulimit::testing::TemporaryDirectory;
namespace status = gpulimit::protocol::status;
namespace usage = gpulimit::usage;

constexpr TimeNs kSecond = 1'000'000'000;
constexpr uint64_t kGiB = 1ull << 30;
constexpr int64_t kRun = 1'700'000'000 * kSecond;
const std::string kUuid = "GPU-11223344-5566-7788-99aa-bbccddeeff00";

status::Report report_with(uint32_t number, uint64_t memory, uint64_t held_ns,
                           uint64_t denials = 0) {
  status::Tenant tenant;
  tenant.tenant = "job-" + std::to_string(number);
  tenant.number = number;
  tenant.uid = 1000;
  tenant.user = "alice";
  tenant.command = "python train.py";
  status::TenantDevice device;
  device.uuid = kUuid;
  device.memory_used = memory;
  device.held_ns = held_ns;
  device.oom_denials = denials;
  tenant.devices.push_back(device);
  status::Report report;
  report.tenants.push_back(tenant);
  return report;
}

class Recorder : public testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    auto database = usage::UsageDatabase::open_for_writing(path(), error);
    ASSERT_TRUE(database) << error;
    recorder_ = std::make_unique<UsageRecorder>(std::move(database), kRun, [](uint32_t uid) {
      return std::vector<std::string>{"alice", "lab", std::to_string(uid)};
    });
  }
  std::string path() const { return dir_.path() + "/usage.db"; }
  std::vector<usage::TenantUsage> saved() {
    std::string error;
    EXPECT_TRUE(recorder_->save(error)) << error;
    auto reader = usage::UsageDatabase::open_for_reading(path(), error);
    std::vector<usage::TenantUsage> records;
    EXPECT_TRUE(reader && reader->load(0, records, error)) << error;
    return records;
  }

  TemporaryDirectory dir_;
  std::unique_ptr<UsageRecorder> recorder_;
};

TEST_F(Recorder, IntegratesMemoryBetweenSamplesAndKeepsItsPeak) {
  recorder_->observe(report_with(1, 2 * kGiB, 0), 10 * kSecond, kRun + 1);
  recorder_->observe(report_with(1, 4 * kGiB, 3 * kSecond), 20 * kSecond, kRun + 2);
  recorder_->observe(report_with(1, 1 * kGiB, 5 * kSecond, 2), 25 * kSecond, kRun + 3);
  const std::vector<usage::TenantUsage> records = saved();
  ASSERT_EQ(records.size(), 1u);
  const usage::TenantUsage& r = records[0];
  EXPECT_EQ(r.run, kRun);
  EXPECT_EQ(r.number, 1u);
  EXPECT_EQ(r.user, "alice");
  EXPECT_EQ(r.groups, (std::vector<std::string>{"alice", "lab", "1000"}));
  EXPECT_EQ(r.command, "python train.py");
  EXPECT_EQ(r.started_ns, kRun + 1);
  EXPECT_EQ(r.updated_ns, kRun + 3);
  EXPECT_FALSE(r.ended_ns);
  ASSERT_EQ(r.devices.size(), 1u);
  // 2 GiB for 10 s, then 4 GiB for 5 s: what was held at a sample until the next.
  EXPECT_DOUBLE_EQ(r.devices[0].byte_seconds, static_cast<double>(40 * kGiB));
  EXPECT_EQ(r.devices[0].peak_bytes, 4 * kGiB);
  EXPECT_EQ(r.devices[0].held_ns, 5 * static_cast<uint64_t>(kSecond));
  EXPECT_EQ(r.devices[0].oom_denials, 2u);
}

// What a forced holder's late drain was charged is GPU time it used.
TEST_F(Recorder, CountsTheTimeChargedAfterAckTimeoutsAsGpuTime) {
  status::Report report = report_with(1, kGiB, 3 * kSecond);
  report.tenants[0].devices[0].overrun_ns = 2 * kSecond;
  recorder_->observe(report, 10 * kSecond, kRun + 1);
  const std::vector<usage::TenantUsage> records = saved();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].devices.at(0).held_ns, 5 * static_cast<uint64_t>(kSecond));
}

TEST_F(Recorder, ATenantThatEndsIsClosedAndCountedInItsUsersTotals) {
  recorder_->observe(report_with(1, kGiB, 3600 * kSecond), 0, kRun);
  recorder_->observe(report_with(1, kGiB, 7200 * kSecond), 3600 * kSecond, kRun + 10);
  recorder_->ended(1, usage::kEndedLeft, kRun + 20);
  recorder_->ended(1, usage::kEndedLeft, kRun + 30);  // once
  recorder_->ended(9, usage::kEndedLeft, kRun + 30);  // never seen: nothing
  const std::vector<usage::TenantUsage> records = saved();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].ended, usage::kEndedLeft);
  EXPECT_EQ(records[0].ended_ns, kRun + 20);
  const auto totals = recorder_->user_totals();
  ASSERT_EQ(totals.count("alice"), 1u);
  EXPECT_DOUBLE_EQ(totals.at("alice").gpu_seconds, 7200);
  EXPECT_DOUBLE_EQ(totals.at("alice").gib_hours, 1);
}

TEST_F(Recorder, StoppingClosesEveryRecordAsStopped) {
  recorder_->observe(report_with(1, kGiB, 0), 0, kRun);
  recorder_->observe(report_with(2, kGiB, 0), 0, kRun);
  recorder_->end_all(usage::kEndedStopped, kRun + 5);
  const std::vector<usage::TenantUsage> records = saved();
  ASSERT_EQ(records.size(), 2u);
  for (const usage::TenantUsage& r : records)
    EXPECT_EQ(r.ended, usage::kEndedStopped);
}

TEST_F(Recorder, ASavedRecordIsNotWrittenAgainUntilItChanges) {
  recorder_->observe(report_with(1, kGiB, 0), 0, kRun);
  std::string error;
  ASSERT_TRUE(recorder_->save(error)) << error;
  // Behind the recorder's back: a save without changes must not overwrite it.
  {
    auto db = usage::UsageDatabase::open_for_writing(path(), error);
    ASSERT_TRUE(db) << error;
    std::vector<usage::TenantUsage> records;
    ASSERT_TRUE(db->load(0, records, error));
    records[0].command = "edited";
    ASSERT_TRUE(db->save(records, error)) << error;
  }
  EXPECT_EQ(saved()[0].command, "edited");
  recorder_->observe(report_with(1, kGiB, 0), kSecond, kRun + 1);
  EXPECT_EQ(saved()[0].command, "python train.py");
}

}  // namespace
