// gpulimitd scraped by a real Prometheus: the server with its metrics
// endpoint, two capped tenants spinning on one simulated GPU under the
// gpulimit command, and Prometheus (Debian's package) scraping every second.
// The series are checked the way a user sees them, through Prometheus's
// query API. Skipped, saying so, where /usr/bin/prometheus is missing.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "simulated_machine.h"
#include "test_client.h"
#include "workload_process.h"

namespace integration {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kServer = GPULIMITD_PATH;
const std::string kCli = GPULIMIT_CLI_PATH;
constexpr const char* kPrometheus = "/usr/bin/prometheus";
// Bounds only a broken setup reaches; a loaded 2-core machine stays far below.
constexpr auto kStartPatience = 30s;
constexpr auto kSeriesPatience = 25s;
constexpr uint64_t kCapA = uint64_t{1} << 30;  // --mem 1G
constexpr uint64_t kCapB = uint64_t{1} << 29;  // --mem 512M

// A port nobody listens on now, for Prometheus's own web listener.
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  close(fd);
  return port;
}

class PrometheusScrape : public testing::Test {
 protected:
  void SetUp() override {
    if (access(kPrometheus, X_OK) != 0)
      GTEST_SKIP() << kPrometheus << " is not installed (Debian package prometheus; "
                   << "scripts/install-deps.sh installs it): nothing to scrape with";
    ASSERT_NO_FATAL_FAILURE(start_server());
    ASSERT_NO_FATAL_FAILURE(start_prometheus());
  }

  void start_server() {
    server_ = std::make_unique<WorkloadProcess>(
        kServer,
        std::vector<std::string>{"--foreground", "--socket", socket_path(), "--idle-exit-s", "600",
                                 "--metrics-address", "127.0.0.1:0"},
        machine_.environment());
    ASSERT_TRUE(server_->started());
    // The status names the port the server took.
    for (const auto deadline = Clock::now() + kStartPatience;;) {
      server_test::TestClient client(socket_path());
      if (client.connected()) {
        const std::optional<nlohmann::json> status = client.status();
        ASSERT_TRUE(status && (*status)["server"]["metrics"].is_string());
        metrics_address_ = (*status)["server"]["metrics"];
        return;
      }
      ASSERT_LT(Clock::now(), deadline) << "gpulimitd never listened";
      std::this_thread::sleep_for(20ms);
    }
  }

  void start_prometheus() {
    const std::string config = directory_.path() + "/prometheus.yml";
    std::ofstream(config) << "global:\n"
                             "  scrape_interval: 1s\n"
                             "  evaluation_interval: 1s\n"
                             "scrape_configs:\n"
                             "  - job_name: gpulimitd\n"
                             "    scrape_interval: 1s\n"
                             "    scrape_timeout: 1s\n"
                             "    static_configs:\n"
                             "      - targets: ['"
                          << metrics_address_ << "']\n";
    prometheus_port_ = free_port();
    ASSERT_GT(prometheus_port_, 0);
    prometheus_ = std::make_unique<WorkloadProcess>(
        kPrometheus,
        std::vector<std::string>{
            "--config.file=" + config, "--storage.tsdb.path=" + directory_.path() + "/data",
            "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port_),
            "--log.level=warn"},
        Environment{});
    ASSERT_TRUE(prometheus_->started());
    httplib::Client http("127.0.0.1", prometheus_port_);
    http.set_connection_timeout(2s);
    for (const auto deadline = Clock::now() + kStartPatience;;) {
      const httplib::Result ready = http.Get("/-/ready");
      if (ready && ready->status == 200) return;
      ASSERT_LT(Clock::now(), deadline)
          << "Prometheus never became ready on port " << prometheus_port_ << ": "
          << prometheus_->wait(1s).describe();
      std::this_thread::sleep_for(100ms);
    }
  }

  // `gpulimit --mem MEM -- spinner` as tenant `id`, wanting the GPU all the
  // time. (A tenant id set in the environment is kept by gpulimit.)
  void start_tenant(const std::string& id, const std::string& mem) {
    Environment env = machine_.environment();
    env = with(env, "GPULIMIT_SOCKET", socket_path());
    env = with(env, "GPULIMIT_LEDGER_DIR", ledgers_.path());
    env = with(env, "GPULIMIT_LIBRARY", GPULIMIT_LIBRARY_PATH);
    env = with(env, "ASAN_OPTIONS", "verify_asan_link_order=0");
    env = with(env, "GPULIMIT_TENANT", id);
    tenants_.push_back(std::make_unique<WorkloadProcess>(
        kCli,
        std::vector<std::string>{"--mem", mem, "--", WORKLOAD_SPINNER_PATH, "--launch", "kernel",
                                 "--kernel-ns", "1000000", "--seconds", "60"},
        env));
    ASSERT_TRUE(tenants_.back()->started());
  }

  // An instant query: the value of each series by its tenant label.
  std::map<std::string, double> query_by_tenant(const std::string& promql) {
    std::map<std::string, double> values;
    httplib::Client http("127.0.0.1", prometheus_port_);
    http.set_read_timeout(5s);
    const httplib::Result response =
        http.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
    if (!response || response->status != 200) return values;
    const nlohmann::json body = nlohmann::json::parse(response->body, nullptr, false);
    if (body.is_discarded() || body["status"] != "success") return values;
    for (const nlohmann::json& series : body["data"]["result"])
      values[series["metric"].value("tenant", "")] =
          std::stod(series["value"][1].get<std::string>());
    return values;
  }

  // Polls `promql` until `done` accepts its result or `deadline` passes; the
  // last result.
  template <typename Done>
  std::map<std::string, double> poll(const std::string& promql, Done done,
                                     Clock::time_point deadline) {
    std::map<std::string, double> values = query_by_tenant(promql);
    while (!done(values) && Clock::now() < deadline) {
      std::this_thread::sleep_for(250ms);
      values = query_by_tenant(promql);
    }
    return values;
  }

  // What a failed assertion should show: the tenants' output and what
  // gpulimitd serves.
  std::string describe() {
    std::string text;
    for (std::size_t i = 0; i < tenants_.size(); ++i)
      text += "tenant " + std::to_string(i) + ": " + tenants_[i]->wait(1s).describe() + "\n";
    httplib::Client http(metrics_address_.substr(0, metrics_address_.rfind(':')),
                         std::stoi(metrics_address_.substr(metrics_address_.rfind(':') + 1)));
    if (const httplib::Result metrics = http.Get("/metrics")) text += metrics->body;
    return text;
  }

  std::string socket_path() const { return sockets_.path() + "/gpulimitd.sock"; }

  SimulatedMachine machine_{"4G"};
  TemporaryDirectory sockets_;
  TemporaryDirectory ledgers_;
  TemporaryDirectory directory_;
  std::string metrics_address_;
  int prometheus_port_ = 0;
  std::unique_ptr<WorkloadProcess> server_;
  std::unique_ptr<WorkloadProcess> prometheus_;
  std::vector<std::unique_ptr<WorkloadProcess>> tenants_;
};

TEST_F(PrometheusScrape, SeesBothTenantsGpuTimeAndTheirCaps) {
  ASSERT_NO_FATAL_FAILURE(start_tenant("prom-a", "1G"));
  ASSERT_NO_FATAL_FAILURE(start_tenant("prom-b", "512M"));

  const auto both = [](const std::map<std::string, double>& values) {
    return values.contains("prom-a") && values.contains("prom-b");
  };
  const auto deadline = Clock::now() + kSeriesPatience;
  const auto gpu_seconds =
      poll(R"(gpulimit_gpu_seconds_total{job="gpulimitd"} > 0)", both, deadline);
  const auto caps = poll(R"(gpulimit_memory_cap_bytes{job="gpulimitd"})", both, deadline);
  const auto grants = poll(R"(gpulimit_token_grants_total{job="gpulimitd"} > 0)", both, deadline);
  const auto waits =
      poll(R"(gpulimit_token_wait_seconds_count{job="gpulimitd"} > 0)", both, deadline);
  const auto up = query_by_tenant(R"(up{job="gpulimitd"})");

  EXPECT_TRUE(both(gpu_seconds)) << "GPU seconds of both tenants above 0";
  EXPECT_TRUE(both(grants)) << "both tenants were granted the token";
  EXPECT_TRUE(both(waits)) << "and waited for it, one observation per grant";
  ASSERT_TRUE(both(caps)) << describe();
  EXPECT_EQ(caps.at("prom-a"), static_cast<double>(kCapA));
  EXPECT_EQ(caps.at("prom-b"), static_cast<double>(kCapB));
  EXPECT_EQ(up.size(), 1u);
  EXPECT_EQ(up.begin()->second, 1.0) << "Prometheus scraped gpulimitd successfully";
}

// Every query of the shipped Grafana dashboard, with its variables set as
// Grafana would, is one Prometheus accepts.
TEST_F(PrometheusScrape, AcceptsEveryQueryOfTheGrafanaDashboard) {
  std::ifstream file(GPULIMIT_DASHBOARD_PATH);
  const nlohmann::json dashboard = nlohmann::json::parse(file, nullptr, false);
  ASSERT_FALSE(dashboard.is_discarded());
  std::vector<std::string> queries;
  for (const nlohmann::json& panel : dashboard["panels"])
    for (const nlohmann::json& target : panel.value("targets", nlohmann::json::array()))
      queries.push_back(target["expr"]);
  ASSERT_FALSE(queries.empty());

  httplib::Client http("127.0.0.1", prometheus_port_);
  http.set_read_timeout(5s);
  for (std::string query : queries) {
    for (const auto& [variable, value] :
         {std::pair{"$__rate_interval", "5s"}, std::pair{"$gpu", ".*"}, std::pair{"$tenant", ".*"}})
      for (std::size_t at; (at = query.find(variable)) != std::string::npos;)
        query.replace(at, std::string(variable).size(), value);
    const httplib::Result response =
        http.Get("/api/v1/query", httplib::Params{{"query", query}}, httplib::Headers{});

    ASSERT_TRUE(response) << query;
    EXPECT_EQ(response->status, 200) << query << ": " << response->body;
  }
}

}  // namespace
}  // namespace integration
