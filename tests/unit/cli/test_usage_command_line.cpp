// gpulimit usage's command line and its report formats.
#include <gtest/gtest.h>

#include <ctime>

#include "usage/usage_command.h"
#include "usage/usage_command_line.h"

namespace {

using namespace gpulimit::cli;
using gpulimit::usage::GroupBy;
using gpulimit::usage::UsageLine;

constexpr int64_t kNs = 1'000'000'000;
constexpr int64_t kNow = 1'800'000'000 * kNs;

UsageOptions parsed(const std::vector<std::string_view>& args) {
  UsageOptions options;
  std::string error;
  EXPECT_TRUE(parse_usage_arguments(args, kNow, options, error)) << error;
  return options;
}

std::string refused(const std::vector<std::string_view>& args) {
  UsageOptions options;
  std::string error;
  EXPECT_FALSE(parse_usage_arguments(args, kNow, options, error));
  return error;
}

TEST(UsageCommandLine, DefaultsToTheSystemDatabaseByUserAsATable) {
  const UsageOptions options = parsed({});
  EXPECT_EQ(options.database, "/var/lib/gpulimit/usage.db");
  EXPECT_EQ(options.since_ns, 0);
  EXPECT_EQ(options.by, GroupBy::kUser);
  EXPECT_EQ(options.format, UsageFormat::kTable);
}

TEST(UsageCommandLine, ReadsEveryOption) {
  const UsageOptions options =
      parsed({"--db", "/tmp/u.db", "--by", "group", "--since", "7d", "--csv"});
  EXPECT_EQ(options.database, "/tmp/u.db");
  EXPECT_EQ(options.by, GroupBy::kGroup);
  EXPECT_EQ(options.since_ns, kNow - 7 * 86'400 * kNs);
  EXPECT_EQ(options.format, UsageFormat::kCsv);
  EXPECT_EQ(parsed({"--by", "tenant", "--json"}).format, UsageFormat::kJson);
}

TEST(UsageCommandLine, SinceTakesLocalDatesTimesAndAges) {
  std::tm when{};
  when.tm_year = 2026 - 1900;
  when.tm_mon = 10;
  when.tm_mday = 30;
  when.tm_hour = 8;
  when.tm_min = 15;
  when.tm_isdst = -1;
  const int64_t expected = static_cast<int64_t>(std::mktime(&when)) * kNs;
  EXPECT_EQ(parse_since("2026-11-30T08:15", kNow), expected);
  EXPECT_EQ(parse_since("2026-11-30T08:15:09", kNow), expected + 9 * kNs);
  EXPECT_EQ(parse_since("2026-11-30", kNow), expected - (8 * 3600 + 15 * 60) * kNs);
  EXPECT_EQ(parse_since("90m", kNow), kNow - 90 * 60 * kNs);
  EXPECT_EQ(parse_since("12h", kNow), kNow - 12 * 3600 * kNs);
  for (const char* bad : {"", "7", "7x", "-7d", "d", "2026-02-31", "2026-13-01", "2026-11-30 08:15",
                          "2026-11-30T25:00", "26-11-30", "99999999999999999999d"})
    EXPECT_EQ(parse_since(bad, kNow), -1) << bad;
}

TEST(UsageCommandLine, RefusesMistakesInOneLine) {
  EXPECT_NE(refused({"--json", "--csv"}).find("exclude each other"), std::string::npos);
  EXPECT_NE(refused({"--by", "project"}).find("not user, group or tenant"), std::string::npos);
  EXPECT_NE(refused({"--since", "yesterday"}).find("--since yesterday"), std::string::npos);
  EXPECT_NE(refused({"--db"}).find("needs a value"), std::string::npos);
  EXPECT_NE(refused({"--verbose"}).find(kUsageUsage), std::string::npos);
  for (const std::string& error : {refused({"--db", ""}), refused({"--by"})})
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

TEST(UsageReport, TableCsvAndJson) {
  UsageLine alice{"alice", 2, 1, 7200, 1.5, 3ull << 30, 4};
  UsageLine comma{"a,b", 1, 0, 0, 0, 0, 0};
  UsageOptions options;
  const std::string table = render_usage({alice}, options);
  EXPECT_EQ(table,
            "USER   TENANTS  RUNNING   GPU-HOURS   GIB-HOURS      PEAK     OOM\n"
            "alice        2        1      2.0000      1.5000     3 GiB       4\n");
  options.format = UsageFormat::kCsv;
  EXPECT_EQ(render_usage({alice, comma}, options),
            "user,tenants,running,gpu_hours,gib_hours,peak_bytes,oom_denials\n"
            "alice,2,1,2.000000,1.500000,3221225472,4\n"
            "\"a,b\",1,0,0.000000,0.000000,0,0\n");
  options.format = UsageFormat::kJson;
  options.by = GroupBy::kGroup;
  options.database = "/tmp/u.db";
  EXPECT_EQ(render_usage({alice}, options),
            "{\"database\":\"/tmp/u.db\",\"since\":null,\"by\":\"group\",\"lines\":[{\"group\":"
            "\"alice\",\"tenants\":2,\"running\":1,\"gpu_hours\":2.0,\"gib_hours\":1.5,"
            "\"peak_bytes\":3221225472,\"oom_denials\":4}]}\n");
  options.format = UsageFormat::kTable;
  EXPECT_EQ(render_usage({}, options).find("(no tenant recorded)"),
            render_usage({}, options).find('\n') + 1);
}

}  // namespace
