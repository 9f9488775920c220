// The usage database (gpulimit/usage/usage_database.h): what is saved is
// what is loaded, across reopening; records of an earlier run left open are
// closed as lost; a file that is not a usage database of this schema is
// refused and left as it was. And the sums of gpulimit usage
// (usage_summary.h).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "gpulimit/testing/temporary_directory.h"
#include "gpulimit/usage/usage_database.h"
#include "gpulimit/usage/usage_summary.h"

namespace {

using gpulimit::testing::TemporaryDirectory;
using namespace gpulimit::usage;

constexpr double kGiB = 1024.0 * 1024 * 1024;

TenantUsage record(int64_t run, uint32_t number, const std::string& user, uint64_t held_ns,
                   double gib_seconds) {
  TenantUsage r;
  r.run = run;
  r.number = number;
  r.tenant = "job-" + std::to_string(number);
  r.uid = 1000 + number;
  r.user = user;
  r.groups = {user, "lab"};
  r.command = "python train.py --lr 0.1,0.2";
  r.started_ns = run + 1'000;
  r.updated_ns = run + 5'000;
  DeviceUsage device;
  device.uuid = "GPU-11223344-5566-7788-99aa-bbccddeeff00";
  device.held_ns = held_ns;
  device.peak_bytes = 3ull << 30;
  device.byte_seconds = gib_seconds * kGiB;
  device.oom_denials = 2;
  r.devices.push_back(device);
  return r;
}

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class UsageDatabaseFile : public testing::Test {
 protected:
  std::string path() const { return dir_.path() + "/usage.db"; }
  TemporaryDirectory dir_;
  std::string error_;
};

TEST_F(UsageDatabaseFile, WhatIsSavedIsLoadedAfterReopening) {
  TenantUsage running = record(100, 1, "alice", 7'000'000'000, 3600);
  TenantUsage ended = record(100, 2, "bob", 1'000'000'000, 60);
  ended.ended_ns = 100 + 9'000;
  ended.ended = kEndedLeft;
  {
    auto db = UsageDatabase::open_for_writing(path(), error_);
    ASSERT_TRUE(db) << error_;
    ASSERT_TRUE(db->save({running, ended}, error_)) << error_;
    running.devices[0].held_ns += 1;  // saved again: replaced, not added
    ASSERT_TRUE(db->save({running}, error_)) << error_;
  }
  auto db = UsageDatabase::open_for_reading(path(), error_);
  ASSERT_TRUE(db) << error_;
  std::vector<TenantUsage> loaded;
  ASSERT_TRUE(db->load(0, loaded, error_)) << error_;
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0], running);
  EXPECT_EQ(loaded[1], ended);
}

TEST_F(UsageDatabaseFile, IsCreatedReadableByAllWhateverTheUmask) {
  const mode_t old = umask(077);
  auto db = UsageDatabase::open_for_writing(path(), error_);
  umask(old);
  ASSERT_TRUE(db) << error_;
  struct stat st {};
  ASSERT_EQ(stat(path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(UsageDatabaseFile, SinceKeepsWhatRanThenOrLater) {
  TenantUsage early = record(100, 1, "alice", 1, 0);
  early.ended_ns = 500;
  early.ended = kEndedLeft;
  TenantUsage late = record(100, 2, "alice", 1, 0);
  late.ended_ns = 2'000;
  late.ended = kEndedLeft;
  TenantUsage running = record(100, 3, "alice", 1, 0);
  auto db = UsageDatabase::open_for_writing(path(), error_);
  ASSERT_TRUE(db) << error_;
  ASSERT_TRUE(db->save({early, late, running}, error_)) << error_;
  std::vector<TenantUsage> loaded;
  ASSERT_TRUE(db->load(1'000, loaded, error_)) << error_;
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].number, 2u);
  EXPECT_EQ(loaded[1].number, 3u);
}

TEST_F(UsageDatabaseFile, RecordsLeftOpenByAnEarlierRunAreClosedAsLost) {
  auto db = UsageDatabase::open_for_writing(path(), error_);
  ASSERT_TRUE(db) << error_;
  const TenantUsage earlier = record(100, 1, "alice", 1, 0);
  const TenantUsage current = record(200, 1, "alice", 1, 0);
  ASSERT_TRUE(db->save({earlier, current}, error_)) << error_;
  EXPECT_EQ(db->close_unfinished(200, error_), 1) << error_;
  std::vector<TenantUsage> loaded;
  ASSERT_TRUE(db->load(0, loaded, error_)) << error_;
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].ended, kEndedLost);
  EXPECT_EQ(loaded[0].ended_ns, earlier.updated_ns) << "ended when it was last heard of";
  EXPECT_EQ(loaded[1].ended, "") << "this run's own stay open";
  EXPECT_EQ(db->close_unfinished(200, error_), 0);
}

TEST_F(UsageDatabaseFile, AFileThatIsNoDatabaseIsRefusedAndLeftAsItWas) {
  const std::string garbage(8192, 'x');
  std::ofstream(path(), std::ios::binary) << garbage;
  EXPECT_FALSE(UsageDatabase::open_for_writing(path(), error_));
  EXPECT_NE(error_.find(path()), std::string::npos) << error_;
  EXPECT_EQ(error_.find('\n'), std::string::npos) << "one line";
  EXPECT_EQ(contents(path()), garbage);
}

TEST_F(UsageDatabaseFile, AnotherSqliteDatabaseIsRefusedAndLeftAsItWas) {
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path().c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "CREATE TABLE t(x); INSERT INTO t VALUES (1);", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(other);
  const std::string before = contents(path());
  EXPECT_FALSE(UsageDatabase::open_for_writing(path(), error_));
  EXPECT_NE(error_.find("not a gpulimit usage database"), std::string::npos) << error_;
  EXPECT_EQ(contents(path()), before);
}

TEST_F(UsageDatabaseFile, ReadingNeedsADatabaseAServerWrote) {
  EXPECT_FALSE(UsageDatabase::open_for_reading(path(), error_)) << "missing";
  std::ofstream(path()).close();
  EXPECT_FALSE(UsageDatabase::open_for_reading(path(), error_)) << "empty";
  EXPECT_NE(error_.find("no gpulimitd has written it"), std::string::npos) << error_;
}

TEST(UsageSummary, SumsPerUserMostGpuTimeFirst) {
  const std::vector<TenantUsage> records = {
      record(1, 1, "alice", 3'600'000'000'000, 3600),  // 1 GPU-hour, 1 GiB-hour
      record(1, 2, "bob", 7'200'000'000'000, 7200), record(1, 3, "alice", 3'600'000'000'000, 0)};
  const std::vector<UsageLine> lines = summarize(records, GroupBy::kUser);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].key, "alice");
  EXPECT_EQ(lines[0].tenants, 2u);
  EXPECT_EQ(lines[0].running, 2u);
  EXPECT_DOUBLE_EQ(lines[0].gpu_seconds, 7200);
  EXPECT_DOUBLE_EQ(lines[0].gib_hours, 1);
  EXPECT_EQ(lines[0].oom_denials, 4u);
  EXPECT_EQ(lines[0].peak_bytes, 3ull << 30);
  EXPECT_EQ(lines[1].key, "bob");
  EXPECT_DOUBLE_EQ(lines[1].gib_hours, 2);
}

TEST(UsageSummary, ATenantCountsInEveryGroupOfItsUser) {
  TenantUsage ungrouped = record(1, 3, "carol", 1'000'000'000, 0);
  ungrouped.groups.clear();
  const std::vector<UsageLine> lines = summarize(
      {record(1, 1, "alice", 1'000'000'000, 0), record(1, 2, "bob", 1'000'000'000, 0), ungrouped},
      GroupBy::kGroup);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].key, "lab");  // most GPU time first
  EXPECT_EQ(lines[0].tenants, 2u);
  EXPECT_DOUBLE_EQ(lines[0].gpu_seconds, 2);
  EXPECT_EQ(lines[1].key, "-") << "a user without groups";
  EXPECT_EQ(lines[2].key, "alice");
  EXPECT_EQ(lines[3].key, "bob");
}

TEST(UsageSummary, ByTenantSumsRunsThatUsedTheSameId) {
  TenantUsage first = record(1, 1, "alice", 1'000'000'000, 0);
  TenantUsage again = record(2, 7, "alice", 2'000'000'000, 0);
  again.tenant = first.tenant;
  const std::vector<UsageLine> lines = summarize({first, again}, GroupBy::kTenant);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].tenants, 2u);
  EXPECT_DOUBLE_EQ(lines[0].gpu_seconds, 3);
}

}  // namespace
