// gpulimitd's statistics and Prometheus endpoint, with a real server: what
// the status JSON and /metrics say after real handoffs and refused
// allocations, an address in use, and scrapers that never finish.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "test_client.h"

namespace server_test {
namespace {

namespace shm = gpulimit::shm;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kWithMetrics = {"--metrics-address", "127.0.0.1:0"};

// The port of the metrics address the status names ("127.0.0.1:PORT").
std::optional<int> metrics_port(TestClient& client) {
  const std::optional<nlohmann::json> status = client.status();
  if (!status || !(*status)["server"]["metrics"].is_string()) return std::nullopt;
  const std::string address = (*status)["server"]["metrics"];
  return std::stoi(address.substr(address.rfind(':') + 1));
}

HelloOptions hello_as(const std::string& tenant, const std::string& ledger_dir) {
  HelloOptions options;
  options.tenant = tenant;
  options.ledger_dir = ledger_dir;
  return options;
}

// GET /metrics; the body, or nullopt with the reason in `error`.
std::optional<std::string> scrape(int port, std::string& error) {
  httplib::Client http("127.0.0.1", port);
  http.set_connection_timeout(10s);
  http.set_read_timeout(10s);
  const httplib::Result response = http.Get("/metrics");
  if (!response) {
    error = httplib::to_string(response.error());
    return std::nullopt;
  }
  if (response->status != 200) {
    error = "HTTP " + std::to_string(response->status);
    return std::nullopt;
  }
  EXPECT_TRUE(response->get_header_value("Content-Type").starts_with("text/plain; version=0.0.4"));
  return response->body;
}

// The value of the sample whose line starts with `series` and a space.
std::optional<double> sample(const std::string& exposition, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const std::size_t at = exposition.find(key);
  if (at == std::string::npos) return std::nullopt;
  return std::stod(exposition.substr(at + key.size()));
}

// Two tenants on kGpu0, handing the token over: `a` holds it, `b` waits for
// it, `a` drains when revoked.
void hand_over(TestClient& a, TestClient& b) {
  ASSERT_TRUE(a.want(a.device()));
  const std::optional<uint32_t> a_grant = a.wait_until_held(a.device());
  ASSERT_TRUE(a_grant);
  ASSERT_TRUE(b.want(b.device()));
  ASSERT_TRUE(a.wait_until_revoked(a.device())) << "the quantum ends";
  ASSERT_TRUE(a.ack(a.device(), *a_grant));
  ASSERT_TRUE(b.wait_until_held(b.device()));
}

TEST(ServerMetrics, StatusCountsGrantsRevokesAndWaitsOfRealHandoffs) {
  gpulimit::testing::TemporaryDirectory dir;
  gpulimit::testing::TemporaryDirectory ledgers;  // empty: no tenant has a ledger
  ServerProcess server(dir.path(), {"--quantum-ms", "5"});
  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  TestClient a(server.socket());
  TestClient b(server.socket());
  ASSERT_TRUE(a.hello(hello_as("tenant-a", ledgers.path()))) << a.refusal();
  ASSERT_TRUE(b.hello(hello_as("tenant-b", ledgers.path()))) << b.refusal();

  ASSERT_NO_FATAL_FAILURE(hand_over(a, b));

  const std::optional<nlohmann::json> status = a.status();
  ASSERT_TRUE(status);
  EXPECT_TRUE((*status)["server"]["metrics"].is_null()) << "per-user: none unless asked";
  const nlohmann::json& tenants = (*status)["tenants"];
  ASSERT_EQ(tenants.size(), 2u) << status->dump();
  const nlohmann::json& on_a = tenants[0]["devices"][0];
  const nlohmann::json& on_b = tenants[1]["devices"][0];
  EXPECT_EQ(tenants[0]["tenant"], "tenant-a");
  EXPECT_EQ(on_a["grants"], 1);
  EXPECT_EQ(on_a["revokes"], 1);
  EXPECT_EQ(on_a["overruns"], 0);
  EXPECT_EQ(on_b["grants"], 1);
  EXPECT_EQ(on_b["revokes"], 0);
  EXPECT_GT(on_b["wait_ns"].get<int64_t>(), 0);
  EXPECT_GT(on_a["held_ns"].get<int64_t>(), 0);
  EXPECT_TRUE(on_a["oom_denials"].is_null()) << "no ledger file: unknown";
  EXPECT_TRUE(tenants[0]["command"].get<std::string>().find("server_integration_test") !=
              std::string::npos)
      << tenants[0]["command"];
}

// gpulimitd with a 50 ms ack timeout and tenants a and b: a takes the token
// and never drains, so b gets it once a's ack timeout has passed.
struct AForcedHolder {
  gpulimit::testing::TemporaryDirectory dir;
  gpulimit::testing::TemporaryDirectory ledgers;
  ServerProcess server{dir.path(), {"--quantum-ms", "5", "--ack-timeout-ms", "50"}};
  std::optional<TestClient> a;  // connected once the server serves
  std::optional<TestClient> b;
  uint32_t forced_grant = 0;  // a's

  void force_a() {
    ASSERT_TRUE(server.wait_until_serving()) << server.log();
    a.emplace(server.socket());
    b.emplace(server.socket());
    ASSERT_TRUE(a->hello(hello_as("tenant-a", ledgers.path()))) << a->refusal();
    ASSERT_TRUE(b->hello(hello_as("tenant-b", ledgers.path()))) << b->refusal();
    ASSERT_TRUE(a->want(a->device()));
    ASSERT_TRUE(a->wait_until_held(a->device()));
    forced_grant = a->grant(a->device());
    ASSERT_TRUE(b->want(b->device()));
    ASSERT_TRUE(b->wait_until_held(b->device())) << "given to b once a's ack timeout passed";
  }
};

TEST(ServerMetrics, StatusCountsAnOverrunWhenTheHolderNeverDrains) {
  AForcedHolder sut;
  ASSERT_NO_FATAL_FAILURE(sut.force_a());

  const std::optional<nlohmann::json> status = sut.a->status();
  ASSERT_TRUE(status);
  EXPECT_EQ((*status)["tenants"][0]["devices"][0]["overruns"], 1) << status->dump();
  EXPECT_EQ((*status)["tenants"][1]["devices"][0]["overruns"], 0) << status->dump();
  EXPECT_EQ((*status)["tenants"][0]["devices"][0]["overrun_ns"], 0) << "no late Ack yet";
}

// The forced holder's late Ack ends the drain it owed: the time from the
// forced release to it is charged, and shows in the status.
TEST(ServerMetrics, ALateAckIsChargedAsOverrunTime) {
  AForcedHolder sut;
  ASSERT_NO_FATAL_FAILURE(sut.force_a());

  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // a's queue drains on
  ASSERT_TRUE(sut.a->ack(sut.a->device(), sut.forced_grant));
  ASSERT_TRUE(sut.a->ack(sut.a->device(), sut.forced_grant))
      << "a second one is stale, and harmless";

  std::optional<nlohmann::json> status;
  for (int i = 0; i < 200; ++i) {  // the Ack and the status request cross on two sockets
    status = sut.a->status();
    ASSERT_TRUE(status);
    if ((*status)["tenants"][0]["devices"][0]["overrun_ns"].get<int64_t>() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE((*status)["tenants"][0]["devices"][0]["overrun_ns"].get<int64_t>(), 30 * 1'000'000)
      << status->dump();
  EXPECT_EQ((*status)["tenants"][1]["devices"][0]["overrun_ns"], 0) << status->dump();
}

TEST(ServerMetrics, StatusReadsOutOfMemoryDenialsFromTheTenantsLedger) {
  gpulimit::testing::TemporaryDirectory dir;
  gpulimit::testing::TemporaryDirectory ledgers;
  std::string error;
  std::unique_ptr<shm::TenantLedger> ledger = shm::TenantLedger::open(ledgers.path(), "job", error);
  ASSERT_NE(ledger, nullptr) << error;
  const int dev = ledger->device(kGpu0.data(), 1'000);
  ASSERT_TRUE(ledger->reserve(dev, 900));
  ASSERT_FALSE(ledger->reserve(dev, 200));
  ASSERT_FALSE(ledger->reserve(dev, 101));
  ServerProcess server(dir.path());
  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  TestClient client(server.socket());
  ASSERT_TRUE(client.hello(hello_as("job", ledgers.path()))) << client.refusal();

  const std::optional<nlohmann::json> status = client.status();

  ASSERT_TRUE(status);
  const nlohmann::json& device = (*status)["tenants"][0]["devices"][0];
  EXPECT_EQ(device["oom_denials"], 2) << status->dump();
  EXPECT_EQ(device["memory_cap"], 1'000);
  EXPECT_EQ(device["memory_used"], 900);
}

TEST(ServerMetrics, ServesTheTenantsSeriesOverHttp) {
  gpulimit::testing::TemporaryDirectory dir;
  gpulimit::testing::TemporaryDirectory ledgers;
  std::string error;
  std::unique_ptr<shm::TenantLedger> ledger =
      shm::TenantLedger::open(ledgers.path(), "tenant-a", error);
  ASSERT_NE(ledger, nullptr) << error;
  const int dev = ledger->device(kGpu0.data(), 4'096);
  ASSERT_FALSE(ledger->reserve(dev, 8'192));
  std::vector<std::string> options = kWithMetrics;
  options.insert(options.end(), {"--quantum-ms", "5"});
  ServerProcess server(dir.path(), options);
  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  TestClient a(server.socket());
  TestClient b(server.socket());
  ASSERT_TRUE(a.hello(hello_as("tenant-a", ledgers.path()))) << a.refusal();
  ASSERT_TRUE(b.hello(hello_as("tenant-b", ledgers.path()))) << b.refusal();
  ASSERT_NO_FATAL_FAILURE(hand_over(a, b));
  const std::optional<int> port = metrics_port(a);
  ASSERT_TRUE(port) << "the status names the metrics address";

  const std::optional<std::string> text = scrape(*port, error);

  ASSERT_TRUE(text) << error;
  const std::string labels_a =
      R"({gpu="0",UUID="GPU-11223344-5566-7788-99aa-bbccddeeff00",tenant="tenant-a",user=")";
  const std::size_t user_at = text->find("gpulimit_memory_cap_bytes" + labels_a);
  ASSERT_NE(user_at, std::string::npos) << *text;
  const std::size_t user_from =
      user_at + std::string("gpulimit_memory_cap_bytes").size() + labels_a.size();
  const std::string user = text->substr(user_from, text->find('"', user_from) - user_from);
  const std::string series_a = labels_a + user + "\"}";
  const std::string series_b =
      R"({gpu="0",UUID="GPU-11223344-5566-7788-99aa-bbccddeeff00",tenant="tenant-b",user=")" +
      user + "\"}";
  EXPECT_EQ(sample(*text, "gpulimit_memory_cap_bytes" + series_a), 4'096);
  EXPECT_EQ(sample(*text, "gpulimit_oom_denials_total" + series_a), 1);
  EXPECT_EQ(sample(*text, "gpulimit_token_grants_total" + series_a), 1);
  EXPECT_EQ(sample(*text, "gpulimit_token_revokes_total" + series_a), 1);
  EXPECT_EQ(sample(*text, "gpulimit_token_grants_total" + series_b), 1);
  EXPECT_GT(sample(*text, "gpulimit_gpu_seconds_total" + series_a).value_or(0), 0);
  EXPECT_EQ(sample(*text, "gpulimit_token_wait_seconds_count" + series_b), 1);
  EXPECT_EQ(sample(*text, "gpulimit_tenants"), 2);
  EXPECT_EQ(sample(*text, "gpulimit_processes"), 2);
  EXPECT_FALSE(sample(*text, "gpulimit_memory_cap_bytes" + series_b)) << "b has no ledger";
}

TEST(ServerMetrics, RefusesToStartWhenTheMetricsAddressIsInUse) {
  gpulimit::testing::TemporaryDirectory dir;
  const int taken = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(taken, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(taken, 1), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(taken, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string in_use = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));

  const CommandOutcome outcome =
      run_gpulimitd({"--foreground", "--socket", dir.path() + "/gpulimitd.sock", "--idle-exit-s",
                     "0", "--metrics-address", in_use});

  close(taken);
  EXPECT_EQ(outcome.status, 1) << outcome.stderr_text;
  const std::string expected =
      "gpulimitd: cannot serve metrics on " + in_use + ": Address already in use";
  const std::size_t at = outcome.stderr_text.find(expected);
  ASSERT_NE(at, std::string::npos) << outcome.stderr_text;
  EXPECT_EQ(outcome.stderr_text.find(expected, at + 1), std::string::npos) << "said once";
  EXPECT_EQ(outcome.stderr_text.find("serving on"), std::string::npos) << outcome.stderr_text;
  TestClient nobody(dir.path() + "/gpulimitd.sock");
  EXPECT_FALSE(nobody.connected()) << "nothing listens on the socket";
}

TEST(ServerMetrics, AScraperThatNeverSendsItsRequestHoldsNothingUp) {
  gpulimit::testing::TemporaryDirectory dir;
  std::vector<std::string> options = kWithMetrics;
  options.insert(options.end(), {"--quantum-ms", "5"});
  gpulimit::testing::TemporaryDirectory ledgers;
  ServerProcess server(dir.path(), options);
  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  TestClient a(server.socket());
  TestClient b(server.socket());
  ASSERT_TRUE(a.hello(hello_as("tenant-a", ledgers.path()))) << a.refusal();
  ASSERT_TRUE(b.hello(hello_as("tenant-b", ledgers.path()))) << b.refusal();
  const std::optional<int> port = metrics_port(a);
  ASSERT_TRUE(port);
  // Connections that send half a request, or nothing, and stay open.
  std::vector<int> stalled;
  for (int i = 0; i < 8; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(*port));
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    if (i % 2) {
      ASSERT_GT(write(fd, "GET /met", 8), 0);
    }
    stalled.push_back(fd);
  }

  ASSERT_NO_FATAL_FAILURE(hand_over(a, b)) << "the event loop still schedules";
  const auto asked = Clock::now();
  const std::optional<nlohmann::json> status = a.status();

  EXPECT_TRUE(status) << "and still answers status";
  EXPECT_LT(Clock::now() - asked, 5s) << "a generous bound: the loop never waits on HTTP";
  EXPECT_EQ(server.stop(20s), 0) << "stops with the scrapers still connected: " << server.log();
  for (const int fd : stalled)
    close(fd);
}

}  // namespace
}  // namespace server_test
