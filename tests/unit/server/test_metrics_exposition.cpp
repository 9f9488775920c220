// The Prometheus text exposition of a status snapshot: families, labels,
// escaping, the histogram, and the format of every line.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gpulimit/server/metrics/metrics_exposition.h"

namespace gpulimit::server {
namespace {

constexpr const char* kUuidText = "GPU-deadbeef-0000-0000-0000-000000000000";
constexpr const char* kLabels =
    R"(gpu="3",UUID="GPU-deadbeef-0000-0000-0000-000000000000",tenant="train",user="alice")";

StatusSnapshot one_tenant() {
  StatusSnapshot snapshot;
  protocol::status::Report& status = snapshot.report;
  status.server.mode = "system";
  status.server.uptime_s = 12.5;
  protocol::status::BoardDevice board;
  board.board_index = 3;
  board.uuid = kUuidText;
  board.waiting = 1;
  status.devices.push_back(board);
  protocol::status::Tenant tenant;
  tenant.tenant = "train";
  tenant.user = "alice";
  tenant.pids = {10, 11};
  protocol::status::TenantDevice device;
  device.uuid = kUuidText;
  device.memory_used = 3'000;
  device.memory_cap = 8'000;
  device.held_ns = 2'500'000'000;
  device.grants = 7;
  device.revokes = 6;
  device.overruns = 1;
  device.overrun_ns = 250'000'000;
  device.oom_denials = 4;
  device.share_target = 0.75;
  device.share_achieved = 0.5;
  tenant.devices.push_back(device);
  status.tenants.push_back(tenant);
  return snapshot;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// The samples, keyed by "name{labels}".
std::map<std::string, std::string> samples_of(const std::string& text) {
  std::map<std::string, std::string> samples;
  for (const std::string& line : lines_of(text)) {
    if (line.starts_with("#")) continue;
    const std::size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = line.substr(space + 1);
  }
  return samples;
}

TEST(MetricsExposition, WritesEachFigureOfATenantWithDcgmStyleLabels) {
  const std::string text = render_metrics(one_tenant(), "1.2.3");

  const auto sut = samples_of(text);
  const std::string labels = std::string("{") + kLabels + "}";
  EXPECT_EQ(sut.at("gpulimit_memory_used_bytes" + labels), "3000");
  EXPECT_EQ(sut.at("gpulimit_memory_cap_bytes" + labels), "8000");
  EXPECT_EQ(sut.at("gpulimit_gpu_seconds_total" + labels), "2.5");
  EXPECT_EQ(sut.at("gpulimit_token_grants_total" + labels), "7");
  EXPECT_EQ(sut.at("gpulimit_token_revokes_total" + labels), "6");
  EXPECT_EQ(sut.at("gpulimit_token_overruns_total" + labels), "1");
  EXPECT_EQ(sut.at("gpulimit_token_overrun_seconds_total" + labels), "0.25");
  EXPECT_EQ(sut.at("gpulimit_oom_denials_total" + labels), "4");
  EXPECT_EQ(sut.at("gpulimit_share_target" + labels), "0.75");
  EXPECT_EQ(sut.at("gpulimit_share_achieved" + labels), "0.5");
  EXPECT_EQ(sut.at(R"(gpulimit_build_info{version="1.2.3",mode="system"})"), "1");
  EXPECT_EQ(sut.at("gpulimit_uptime_seconds"), "12.5");
  EXPECT_EQ(sut.at("gpulimit_tenants"), "1");
  EXPECT_EQ(sut.at("gpulimit_processes"), "2");
  EXPECT_EQ(sut.at(R"(gpulimit_tenant_processes{tenant="train",user="alice"})"), "2");
  EXPECT_EQ(
      sut.at(std::string(R"(gpulimit_token_waiting_tenants{gpu="3",UUID=")") + kUuidText + "\"}"),
      "1");
}

TEST(MetricsExposition, LeavesOutMemoryFiguresOfAnUncappedDevice) {
  StatusSnapshot status = one_tenant();
  status.report.tenants[0].devices[0].memory_used.reset();
  status.report.tenants[0].devices[0].memory_cap.reset();
  status.report.tenants[0].devices[0].oom_denials.reset();

  const auto sut = samples_of(render_metrics(status, "1"));

  for (const auto& [series, value] : sut) {
    EXPECT_FALSE(series.starts_with("gpulimit_memory_")) << series;
    EXPECT_FALSE(series.starts_with("gpulimit_oom_denials")) << series;
  }
  EXPECT_TRUE(sut.contains(std::string("gpulimit_gpu_seconds_total{") + kLabels + "}"));
}

TEST(MetricsExposition, WritesTheWaitHistogramCumulatively) {
  StatusSnapshot status = one_tenant();
  WaitHistogram& waits = status.waits[{"train", kUuidText}];
  waits.observe(50'000);          // 50 us: first bucket
  waits.observe(3'000'000);       // 3 ms: the 5 ms bucket
  waits.observe(20'000'000'000);  // 20 s: only +Inf

  const auto sut = samples_of(render_metrics(status, "1"));

  const auto bucket = [&](const std::string& le) {
    return sut.at(std::string("gpulimit_token_wait_seconds_bucket{") + kLabels + ",le=\"" + le +
                  "\"}");
  };
  EXPECT_EQ(bucket("0.0001"), "1");
  EXPECT_EQ(bucket("0.0025"), "1");
  EXPECT_EQ(bucket("0.005"), "2");
  EXPECT_EQ(bucket("10"), "2");
  EXPECT_EQ(bucket("+Inf"), "3");
  EXPECT_EQ(sut.at(std::string("gpulimit_token_wait_seconds_count{") + kLabels + "}"), "3");
  EXPECT_EQ(sut.at(std::string("gpulimit_token_wait_seconds_sum{") + kLabels + "}"), "20.00305");
}

TEST(MetricsExposition, EscapesBackslashQuoteAndNewlineInLabelValues) {
  EXPECT_EQ(escape_label_value(R"(a"b\c)"
                               "\n"
                               "d"),
            R"(a\"b\\c\nd)");
  EXPECT_EQ(escape_label_value("plain-name_1.x"), "plain-name_1.x");
}

TEST(MetricsExposition, EscapesATenantNamedAwkwardly) {
  StatusSnapshot status = one_tenant();
  status.report.tenants[0].user = "o\"brien\\\n";

  const std::string text = render_metrics(status, "1");

  EXPECT_NE(text.find(R"(user="o\"brien\\\n")"), std::string::npos) << text;
}

TEST(MetricsExposition, GivesEveryFamilyOneHelpAndOneTypeBeforeItsSamples) {
  const std::string text = render_metrics(one_tenant(), "1");

  std::map<std::string, int> helps;
  std::map<std::string, std::string> types;
  const std::regex help(R"(# HELP (\w+) .+)");
  const std::regex type(R"(# TYPE (\w+) (counter|gauge|histogram))");
  const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]\w*="([^"\\]|\\.)*",?)*\})? (\S+))");
  std::smatch match;
  for (const std::string& line : lines_of(text)) {
    if (std::regex_match(line, match, help)) {
      ++helps[match[1]];
    } else if (std::regex_match(line, match, type)) {
      EXPECT_FALSE(types.contains(match[1])) << "a second TYPE: " << line;
      types[match[1]] = match[2];
    } else {
      ASSERT_TRUE(std::regex_match(line, match, sample)) << "not a sample: " << line;
      std::string family = match[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        if (!types.contains(family) && family.ends_with(suffix))
          family.resize(family.size() - std::string(suffix).size());
      EXPECT_TRUE(types.contains(family)) << "a sample before its TYPE: " << line;
      EXPECT_NO_THROW((void)std::stod(match[5].str())) << line;
    }
  }
  for (const std::string& name : metric_family_names()) {
    EXPECT_EQ(helps[name], 1) << name;
    EXPECT_TRUE(types.contains(name)) << name;
  }
  EXPECT_EQ(types["gpulimit_token_wait_seconds"], "histogram");
  EXPECT_EQ(types["gpulimit_gpu_seconds_total"], "counter");
}

TEST(MetricsExposition, NamesFollowPrometheusConventions) {
  const std::string text = render_metrics(one_tenant(), "1");
  std::map<std::string, std::string> types;
  const std::regex type(R"(# TYPE (\w+) (\w+))");
  std::smatch match;
  for (const std::string& line : lines_of(text))
    if (std::regex_match(line, match, type)) types[match[1]] = match[2];

  for (const auto& [name, kind] : types) {
    EXPECT_TRUE(name.starts_with("gpulimit_")) << name;
    EXPECT_EQ(kind == "counter", name.ends_with("_total")) << name << " is a " << kind;
  }
}

TEST(MetricsExposition, UsersTotalsFromTheUsageDatabase) {
  StatusSnapshot status = one_tenant();
  status.usage["alice"] = {7200.5, 1.25};
  status.usage["bob"] = {0, 0};
  const std::map<std::string, std::string> samples = samples_of(render_metrics(status, "1"));
  EXPECT_EQ(samples.at("gpulimit_user_gpu_seconds_total{user=\"alice\"}"), "7200.5");
  EXPECT_EQ(samples.at("gpulimit_user_memory_gib_hours_total{user=\"alice\"}"), "1.25");
  EXPECT_EQ(samples.at("gpulimit_user_gpu_seconds_total{user=\"bob\"}"), "0");
}

TEST(MetricsExposition, TheFairShareTreeOnceAGroupAndUser) {
  StatusSnapshot status = one_tenant();
  status.report.tenants[0].group = "ml";
  status.report.tenants[0].group_share = 3;
  status.report.tenants[0].user_share = 2;
  protocol::status::Tenant second = status.report.tenants[0];
  second.tenant = "eval";
  status.report.tenants.push_back(second);
  protocol::status::Tenant older = status.report.tenants[0];
  older.tenant = "from-an-older-server";
  older.group.reset();
  status.report.tenants.push_back(older);

  const std::string text = render_metrics(status, "1");
  const std::map<std::string, std::string> samples = samples_of(text);

  EXPECT_EQ(samples.at(R"(gpulimit_tenant_group_info{tenant="train",user="alice",group="ml"})"),
            "1");
  EXPECT_EQ(samples.at(R"(gpulimit_tenant_group_info{tenant="eval",user="alice",group="ml"})"),
            "1");
  EXPECT_EQ(samples.at(R"(gpulimit_group_share{group="ml"})"), "3");
  EXPECT_EQ(samples.at(R"(gpulimit_user_share{group="ml",user="alice"})"), "2");
  EXPECT_EQ(text.find("from-an-older-server\",user=\"alice\",group"), std::string::npos);
  std::size_t group_series = 0;
  for (const auto& [series, value] : samples)
    group_series += series.starts_with("gpulimit_group_share{") ? 1 : 0;
  EXPECT_EQ(group_series, 1u) << "one series a group, however many tenants";
}

TEST(MetricsExposition, EachMemoryTotalWithWhatIsUsedAndLeased) {
  StatusSnapshot status = one_tenant();
  status.report.memory_totals.push_back(
      {"group", 2000, "ml", 0, "GPU-deadbeef-0000-0000-0000-000000000000", 4096, 1024, 2048, 1});
  status.report.memory_totals.push_back(
      {"user", 1000, "alice", std::nullopt, std::nullopt, 8192, 1024, 1024, 1});

  const std::map<std::string, std::string> samples = samples_of(render_metrics(status, "1"));

  const std::string ml =
      R"({scope="group",name="ml",gpu="0",UUID="GPU-deadbeef-0000-0000-0000-000000000000"})";
  EXPECT_EQ(samples.at("gpulimit_memory_total_bytes" + ml), "4096");
  EXPECT_EQ(samples.at("gpulimit_memory_total_used_bytes" + ml), "1024");
  EXPECT_EQ(samples.at("gpulimit_memory_total_leased_bytes" + ml), "2048");
  EXPECT_EQ(
      samples.at(R"(gpulimit_memory_total_bytes{scope="user",name="alice",gpu="all",UUID=""})"),
      "8192");
}

TEST(MetricsExposition, WithNoTenantStillDescribesEveryFamily) {
  StatusSnapshot status;
  status.report.server.mode = "user";

  const std::string text = render_metrics(status, "1");

  for (const std::string& name : metric_family_names())
    EXPECT_NE(text.find("# TYPE " + name + " "), std::string::npos) << name;
  EXPECT_EQ(samples_of(text).at("gpulimit_tenants"), "0");
}

}  // namespace
}  // namespace gpulimit::server
