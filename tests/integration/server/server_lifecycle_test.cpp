// gpulimitd's life: starting beside another server or a stale socket,
// detaching, stopping on a signal, leaving when idle, and its status.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/shm/board.h"
#include "gpulimit/shm/tenant_ledger.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "test_client.h"

namespace server_test {
namespace {

namespace shm = gpulimit::shm;
using std::chrono::milliseconds;

bool exists(const std::string& path) {
  struct stat status {};
  return lstat(path.c_str(), &status) == 0;
}

std::size_t count_lines(const std::string& text) {
  std::size_t lines = 0;
  for (const char c : text)
    lines += c == '\n';
  return lines;
}

TEST(ServerLifecycle, StopsCleanlyOnSigtermReleasingEveryToken) {
  gpulimit::testing::TemporaryDirectory dir;
  ServerProcess server(dir.path());
  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  TestClient holder(server.socket());
  ASSERT_TRUE(holder.hello());
  ASSERT_TRUE(holder.want(holder.device()));
  ASSERT_TRUE(holder.wait_until_held(holder.device()));

  EXPECT_EQ(server.stop(), 0) << server.log();

  EXPECT_EQ(holder.token(holder.device()), 0u) << "the token word is cleared";
  EXPECT_TRUE(holder.closed_by_server());
  EXPECT_FALSE(exists(server.socket())) << "the socket file is removed";
  EXPECT_NE(server.log().find("stopping: Terminated"), std::string::npos) << server.log();
}

TEST(ServerLifecycle, RefusesToStartWhileAnotherServerServesTheSocket) {
  gpulimit::testing::TemporaryDirectory dir;
  ServerProcess first(dir.path());
  ASSERT_TRUE(first.wait_until_serving()) << first.log();

  const CommandOutcome second =
      run_gpulimitd({"--foreground", "--socket", first.socket(), "--idle-exit-s", "0"});

  EXPECT_EQ(second.status, 1);
  EXPECT_EQ(count_lines(second.stderr_text), 1u) << second.stderr_text;
  EXPECT_NE(second.stderr_text.find("already serves " + first.socket()), std::string::npos)
      << second.stderr_text;
  EXPECT_NE(second.stderr_text.find("pid " + std::to_string(first.pid())), std::string::npos)
      << second.stderr_text;
  TestClient still_served(first.socket());
  EXPECT_TRUE(still_served.hello());
}

TEST(ServerLifecycle, ReplacesTheStaleSocketOfADeadServer) {
  gpulimit::testing::TemporaryDirectory dir;
  const std::string path = dir.path() + "/gpulimitd.sock";
  {
    // A socket file nobody listens on, as a killed server leaves it.
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strcpy(address.sun_path, path.c_str());
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    close(fd);
  }
  ASSERT_TRUE(exists(path));

  ServerProcess server(dir.path());

  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  TestClient client(server.socket());
  EXPECT_TRUE(client.hello());
}

TEST(ServerLifecycle, RefusesToReplaceAFileThatIsNotASocket) {
  gpulimit::testing::TemporaryDirectory dir;
  const std::string path = dir.path() + "/gpulimitd.sock";
  std::ofstream(path) << "not a socket\n";

  const CommandOutcome outcome = run_gpulimitd({"--foreground", "--socket", path});

  EXPECT_EQ(outcome.status, 1);
  EXPECT_NE(outcome.stderr_text.find("is not a socket"), std::string::npos) << outcome.stderr_text;
  EXPECT_TRUE(exists(path));
}

TEST(ServerLifecycle, InTheBackgroundReturnsOnlyOnceServing) {
  gpulimit::testing::TemporaryDirectory dir;
  const std::string socket = dir.path() + "/gpulimitd.sock";

  const CommandOutcome started = run_gpulimitd({"--socket", socket, "--idle-exit-s", "0"});

  ASSERT_EQ(started.status, 0) << started.stderr_text;
  TestClient client(socket);
  EXPECT_TRUE(client.hello()) << "connectable as soon as the command returned";
  std::ifstream lock(socket + ".lock");
  pid_t daemon = 0;
  lock >> daemon;
  ASSERT_GT(daemon, 0);
  EXPECT_EQ(client.board().server_pid, daemon);
  kill(daemon, SIGTERM);
  EXPECT_TRUE(client.closed_by_server());
  for (int i = 0; i < 5000 && exists(socket); ++i)
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_FALSE(exists(socket));
  std::ifstream log(dir.path() + "/gpulimitd.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("serving on " + socket), std::string::npos) << text.str();
}

TEST(ServerLifecycle, ExitsWhenIdleInUserModeButNotWhileATenantIsConnected) {
  gpulimit::testing::TemporaryDirectory dir;
  ServerProcess server(dir.path(), {"--idle-exit-s", "1"});
  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  auto client = std::make_unique<TestClient>(server.socket());
  ASSERT_TRUE(client->hello());

  EXPECT_EQ(server.wait_for_exit(milliseconds(1'500)), -1) << "exited with a tenant connected";
  client.reset();

  EXPECT_EQ(server.wait_for_exit(milliseconds(10'000)), 0) << server.log();
  EXPECT_NE(server.log().find("idle exit"), std::string::npos);
}

TEST(ServerLifecycle, StatusFollowsTheSchema) {
  gpulimit::testing::TemporaryDirectory dir;
  ServerProcess server(dir.path(), {"--quantum-ms", "15"});
  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  std::string error;
  auto ledger = shm::TenantLedger::open(dir.path(), "trainer", error);
  ASSERT_TRUE(ledger) << error;
  const int ledger_device = ledger->device(kGpu0.data(), uint64_t{8} << 30);
  ASSERT_TRUE(ledger->reserve(ledger_device, uint64_t{3} << 30));
  TestClient trainer(server.socket());
  HelloOptions trainer_options;
  trainer_options.tenant = "trainer";
  trainer_options.ledger_dir = dir.path();
  trainer_options.weight = 3;
  trainer_options.priority = gpulimit::protocol::Priority::kHigh;
  ASSERT_TRUE(trainer.hello(trainer_options));
  ASSERT_TRUE(trainer.want(trainer.device()));
  ASSERT_TRUE(trainer.wait_until_held(trainer.device()));
  TestClient capped(server.socket());
  HelloOptions capped_options;
  capped_options.tenant = "capped";
  capped_options.sm_percent = 30;
  capped_options.uuids = {kGpu0, kGpu1};
  ASSERT_TRUE(capped.hello(capped_options));
  ASSERT_TRUE(capped.want(capped.device(0)));
  std::this_thread::sleep_for(milliseconds(5));  // let the server take the Want in

  const auto status = TestClient(server.socket()).status();

  ASSERT_TRUE(status);
  const auto& s = (*status)["server"];
  EXPECT_EQ(s["pid"], server.pid());
  EXPECT_EQ(s["mode"], "user");
  EXPECT_EQ(s["socket"], server.socket());
  EXPECT_EQ(s["quantum_us"], 15'000);
  EXPECT_TRUE(s["uptime_s"].is_number_float());
  EXPECT_EQ(s["protocol"], gpulimit::protocol::kVersion);
  EXPECT_TRUE(s["metrics"].is_null()) << "per-user: no metrics unless asked";
  EXPECT_EQ(s.size(), 7u);

  const auto& devices = (*status)["devices"];
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0]["board_index"], 0);
  EXPECT_EQ(devices[0]["uuid"], "GPU-11223344-5566-7788-99aa-bbccddeeff00");
  EXPECT_EQ(devices[0]["holder"], "trainer");
  EXPECT_EQ(devices[0]["waiting"], 1);
  EXPECT_TRUE(devices[1]["holder"].is_null());
  EXPECT_EQ(devices[1]["uuid"], "GPU-a1a2a3a4-a5a6-a7a8-a9aa-abacadaeafb0");
  EXPECT_EQ(devices[0].size(), 4u);

  const auto& tenants = (*status)["tenants"];
  ASSERT_EQ(tenants.size(), 2u);
  const auto& t = tenants[0];
  EXPECT_EQ(t["tenant"], "trainer");
  EXPECT_EQ(t["number"], trainer.tenant());
  EXPECT_EQ(t["uid"], getuid());
  EXPECT_TRUE(t["user"].is_string());
  EXPECT_EQ(t["pids"], nlohmann::json::array({getpid()}));
  EXPECT_TRUE(t["sm_percent"].is_null());
  EXPECT_EQ(t["weight"], 3);
  EXPECT_EQ(t["priority"], "high");
  EXPECT_TRUE(t["command"].is_string());
  EXPECT_TRUE(t["leader"].is_null()) << "a test process names no leader";
  EXPECT_TRUE(t["orphaned_s"].is_null());
  EXPECT_TRUE(t["orphan_kill_in_s"].is_null());
  EXPECT_EQ(t["gid"], getgid());
  EXPECT_TRUE(t["group"].is_string());
  EXPECT_EQ(t["group_share"], 1) << "no policy: every share is 1";
  EXPECT_EQ(t["user_share"], 1);
  EXPECT_EQ(t.size(), 17u);
  ASSERT_EQ(t["devices"].size(), 1u);
  const auto& d = t["devices"][0];
  EXPECT_EQ(d["uuid"], "GPU-11223344-5566-7788-99aa-bbccddeeff00");
  EXPECT_EQ(d["memory_used"], uint64_t{3} << 30);
  EXPECT_EQ(d["memory_cap"], uint64_t{8} << 30);
  EXPECT_DOUBLE_EQ(d["share_target"].get<double>(), 1.0) << "high priority takes it all";
  EXPECT_GT(d["share_achieved"].get<double>(), 0.5);
  EXPECT_GT(d["held_ns"].get<int64_t>(), 0);
  EXPECT_EQ(d["grants"], 1);
  EXPECT_EQ(d["revokes"], 0);
  EXPECT_EQ(d["overruns"], 0);
  EXPECT_TRUE(d["wait_ns"].is_number_integer());
  EXPECT_EQ(d["oom_denials"], 0);
  EXPECT_EQ(d["overrun_ns"], 0);
  EXPECT_EQ(d.size(), 12u);

  const auto& c = tenants[1];
  EXPECT_EQ(c["tenant"], "capped");
  EXPECT_EQ(c["sm_percent"], 30);
  EXPECT_EQ(c["priority"], "normal");
  ASSERT_EQ(c["devices"].size(), 2u);
  EXPECT_TRUE(c["devices"][0]["memory_used"].is_null()) << "no ledger entry: no memory cap";
  EXPECT_TRUE(c["devices"][0]["memory_cap"].is_null());
  EXPECT_TRUE(c["devices"][0]["oom_denials"].is_null());
  EXPECT_DOUBLE_EQ(c["devices"][0]["share_target"].get<double>(), 0.0);
  EXPECT_EQ(c["devices"][1]["held_ns"], 0);
}

}  // namespace
}  // namespace server_test
