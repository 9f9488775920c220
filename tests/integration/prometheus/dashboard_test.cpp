// tools/grafana/gpulimit-dashboard.json: well-formed, laid out on Grafana's
// 24-column grid, and querying only series gpulimitd serves.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "gpulimit/server/metrics/metrics_exposition.h"

namespace {

const std::string kDashboard = GPULIMIT_DASHBOARD_PATH;

nlohmann::json load_dashboard() {
  std::ifstream file(kDashboard);
  EXPECT_TRUE(file) << "cannot open " << kDashboard;
  return nlohmann::json::parse(file, nullptr, false);
}

// Every PromQL expression of the dashboard: panel targets and variables.
std::vector<std::string> expressions(const nlohmann::json& dashboard) {
  std::vector<std::string> found;
  for (const nlohmann::json& panel : dashboard["panels"])
    for (const nlohmann::json& target : panel.value("targets", nlohmann::json::array()))
      found.push_back(target.value("expr", ""));
  for (const nlohmann::json& variable : dashboard["templating"]["list"])
    if (variable.value("type", "") == "query") found.push_back(variable.value("definition", ""));
  return found;
}

TEST(GrafanaDashboard, IsWellFormedJson) {
  const nlohmann::json sut = load_dashboard();

  ASSERT_FALSE(sut.is_discarded()) << kDashboard << " is not valid JSON";
  EXPECT_EQ(sut["title"], "gpulimit");
  EXPECT_FALSE(sut["uid"].get<std::string>().empty());
  EXPECT_GT(sut["panels"].size(), 5u);
}

TEST(GrafanaDashboard, PanelsHaveUniqueIdsAndFitTheGrid) {
  const nlohmann::json sut = load_dashboard();
  ASSERT_FALSE(sut.is_discarded());

  std::set<int> ids;
  for (const nlohmann::json& panel : sut["panels"]) {
    EXPECT_TRUE(ids.insert(panel["id"].get<int>()).second) << "id " << panel["id"] << " twice";
    const nlohmann::json& grid = panel["gridPos"];
    EXPECT_LE(grid["x"].get<int>() + grid["w"].get<int>(), 24) << panel["title"];
    EXPECT_GT(grid["h"].get<int>(), 0) << panel["title"];
    if (panel["type"] != "row") {
      ASSERT_FALSE(panel["targets"].empty()) << panel["title"];
      for (const nlohmann::json& target : panel["targets"])
        EXPECT_FALSE(target["expr"].get<std::string>().empty()) << panel["title"];
    }
  }
}

TEST(GrafanaDashboard, QueriesOnlySeriesGpulimitdServes) {
  const nlohmann::json sut = load_dashboard();
  ASSERT_FALSE(sut.is_discarded());
  const std::vector<std::string> names = gpulimit::server::metric_family_names();
  const std::set<std::string> served(names.begin(), names.end());

  std::set<std::string> used;
  const std::regex metric(R"(gpulimit_[a-z_]+)");
  for (const std::string& expr : expressions(sut)) {
    for (auto it = std::sregex_iterator(expr.begin(), expr.end(), metric);
         it != std::sregex_iterator(); ++it) {
      std::string name = it->str();
      for (const std::string suffix : {"_bucket", "_sum", "_count"})
        if (!served.contains(name) && name.ends_with(suffix))
          name.resize(name.size() - suffix.size());
      EXPECT_TRUE(served.contains(name)) << it->str() << " in " << expr;
      used.insert(name);
    }
  }
  for (const char* essential :
       {"gpulimit_gpu_seconds_total", "gpulimit_memory_used_bytes", "gpulimit_memory_cap_bytes",
        "gpulimit_token_wait_seconds", "gpulimit_oom_denials_total"})
    EXPECT_TRUE(used.contains(essential)) << essential << " has no panel";
}

}  // namespace
