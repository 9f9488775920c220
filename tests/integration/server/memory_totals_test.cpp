// Group and user memory totals end to end: a real gpulimitd with a policy
// whose memory_total binds this test's own user (or group), tenants of that
// user under libgpulimit.so on the simulated GPU (the allocator), and what
// each one really got from the driver. The lease protocol they follow:
// limiter-server/model/README.md.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gpulimit/testing/simulated_machine.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "test_client.h"
#include "workload_output.h"

namespace server_test {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kProgramTimeout{60'000};
constexpr uint64_t kMiB = uint64_t{1} << 20;

// On a simulated machine of `kDevices` GPUs of 4 GiB.
template <uint32_t kDevices>
class MemoryTotalsOn : public ::testing::Test {
 protected:
  std::string policy_path() const { return dir_.path() + "/policy.toml"; }
  void write_policy(const std::string& text) const {
    std::ofstream(policy_path() + ".new") << text;
    ASSERT_EQ(::rename((policy_path() + ".new").c_str(), policy_path().c_str()), 0);
  }
  static std::string my_user() { return "[users." + std::to_string(::getuid()) + "]\n"; }
  static std::string my_group() { return "[groups." + std::to_string(::getgid()) + "]\n"; }

  void start_server() {
    server_ = std::make_unique<ServerProcess>(
        dir_.path(), std::vector<std::string>{"--policy", policy_path(), "--quantum-ms", "40"});
    ASSERT_TRUE(server_->wait_until_serving()) << server_->log();
  }

  // `gpu`: the one GPU it sees (CUDA_VISIBLE_DEVICES), or all of them.
  std::vector<std::string> tenant_environment(const std::string& tenant,
                                              std::optional<int> gpu) const {
    auto environment = gpulimit::testing::with(machine_.tenant_environment(dir_.path(), "", tenant),
                                               "GPULIMIT_SOCKET", server_->socket());
    if (gpu)
      environment =
          gpulimit::testing::with(environment, "CUDA_VISIBLE_DEVICES", std::to_string(*gpu));
    return gpulimit::testing::assignments(environment);
  }

  // The allocator as tenant `tenant`, up to `target` in 64 MiB chunks,
  // holding what it got for `hold_s` seconds (0: not at all).
  gpulimit::testing::Process start_allocator(const std::string& tenant, const std::string& target,
                                             int hold_s, std::optional<int> gpu = std::nullopt) {
    std::vector<std::string> arguments = {
        WORKLOAD_ALLOCATOR_PATH, "--path", "linear", "--target", target, "--chunk", "64M"};
    if (hold_s > 0) {
      arguments.push_back("--hold");
      arguments.push_back(std::to_string(hold_s));
    }
    return spawn_program(arguments, tenant_environment(tenant, gpu), output_of(tenant));
  }
  std::string output_of(const std::string& tenant) const {
    return dir_.path() + "/" + tenant + ".out";
  }
  // What the holding allocator `tenant` got, once it holds it.
  uint64_t held_by(const std::string& tenant) {
    const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string output = read_file(output_of(tenant));
      if (output.find("event=holding") != std::string::npos)
        return std::stoull(value_of(output, "bytes"));
      std::this_thread::sleep_for(milliseconds(20));
    }
    ADD_FAILURE() << tenant << " never held its memory: " << read_file(output_of(tenant))
                  << server_->log();
    return 0;
  }
  // Runs the allocator as `tenant` to the end; the bytes it got.
  uint64_t allocate(const std::string& tenant, const std::string& target,
                    std::optional<int> gpu = std::nullopt) {
    gpulimit::testing::Process allocator = start_allocator(tenant, target, 0, gpu);
    EXPECT_EQ(wait_for_program(allocator, kProgramTimeout), 0)
        << read_file(output_of(tenant)) << server_->log();
    const std::string output = read_file(output_of(tenant));
    const std::string bytes = value_of(output, "bytes");
    EXPECT_FALSE(bytes.empty()) << output;
    return bytes.empty() ? 0 : std::stoull(bytes);
  }

  std::optional<nlohmann::json> status() {
    TestClient client(server_->socket());
    return client.status();
  }
  // The one memory total the server's status shows, into `out`; a fatal
  // failure when there is not exactly one.
  void only_total(nlohmann::json& out) {
    const std::optional<nlohmann::json> report = status();
    ASSERT_TRUE(report);
    ASSERT_EQ((*report)["memory_totals"].size(), 1u) << report->dump();
    out = (*report)["memory_totals"][0];
  }

  gpulimit::testing::TemporaryDirectory dir_;
  gpulimit::testing::SimulatedMachine machine_{gpulimit::testing::MachineShape{kDevices}};
  std::unique_ptr<ServerProcess> server_;
};
using MemoryTotals = MemoryTotalsOn<1>;
using MemoryTotalsOnTwoGpus = MemoryTotalsOn<2>;

TEST_F(MemoryTotals, TwoTenantsOfAUserShareItsTotalAndAKilledOnesMemoryComesBack) {
  write_policy(my_user() + "memory_total = \"1G\"\n");
  start_server();

  gpulimit::testing::Process first = start_allocator("first", "640M", 60);
  EXPECT_EQ(held_by("first"), 640 * kMiB);
  // The second gets what the first does not hold of the total, though the
  // first was leased more than it uses: the server takes that back.
  gpulimit::testing::Process second = start_allocator("second", "3G", 60);
  EXPECT_EQ(held_by("second"), 384 * kMiB);
  // What it sees as free: what the total has left it, none once it holds that.
  EXPECT_EQ(value_of(read_file(output_of("second")), "free_after_alloc"), "0")
      << read_file(output_of("second"));

  nlohmann::json total;
  ASSERT_NO_FATAL_FAILURE(only_total(total));
  EXPECT_EQ(total["scope"], "user");
  EXPECT_EQ(total["id"], ::getuid());
  EXPECT_EQ(total["total"], 1024 * kMiB);
  EXPECT_EQ(total["used"], 1024 * kMiB);
  EXPECT_LE(total["promised"].get<uint64_t>(), 1024 * kMiB);
  EXPECT_EQ(total["tenants"], 2);

  // SIGKILLed while it holds its 640 MiB: once the kernel says it has
  // exited, its lease is free for another tenant.
  first.signal(SIGKILL);
  wait_for_program(first, kProgramTimeout);
  const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
  uint64_t third = 0;
  while (std::chrono::steady_clock::now() < deadline &&
         (third = allocate("third", "640M")) < 640 * kMiB)
    std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(third, 640 * kMiB) << server_->log();
  EXPECT_EQ(value_of(read_file(output_of("third")), "free_before"), std::to_string(640 * kMiB))
      << "the total less what the second holds";
  second.signal(SIGKILL);
  wait_for_program(second, kProgramTimeout);
}

TEST_F(MemoryTotals, TenantsRacingForTheLastBytesNeverPassTheGroupsTotal) {
  write_policy(my_group() + "memory_total = \"1G\"\n");
  start_server();
  constexpr int kTenants = 5;
  std::vector<gpulimit::testing::Process> racers;
  for (int i = 0; i < kTenants; ++i)
    racers.push_back(start_allocator("racer" + std::to_string(i), "3G", 60));
  uint64_t sum = 0;
  for (int i = 0; i < kTenants; ++i)
    sum += held_by("racer" + std::to_string(i));
  EXPECT_LE(sum, 1024 * kMiB);
  // Refusals are only where the total was full when asked: most of it is
  // taken (a reservation undone at the moment the server counted it may
  // refuse one chunk too early per racer).
  EXPECT_GE(sum, 1024 * kMiB - (kTenants - 1) * 64 * kMiB);
  nlohmann::json total;
  ASSERT_NO_FATAL_FAILURE(only_total(total));
  EXPECT_EQ(total["scope"], "group");
  EXPECT_EQ(total["used"], sum);
  for (gpulimit::testing::Process& racer : racers) {
    racer.signal(SIGKILL);
    wait_for_program(racer, kProgramTimeout);
  }
}

TEST_F(MemoryTotals, AReloadThatLowersTheTotalRefusesNewMemoryAndTakesNothingBack) {
  write_policy(my_user() + "memory_total = \"1G\"\n");
  start_server();
  gpulimit::testing::Process holder = start_allocator("holder", "640M", 60);
  EXPECT_EQ(held_by("holder"), 640 * kMiB);

  write_policy(my_user() + "memory_total = \"512M\"\n");
  ASSERT_EQ(::kill(server_->pid(), SIGHUP), 0);
  const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
  while (server_->log().find("1G -> 512M") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(20));
  EXPECT_NE(server_->log().find("1G -> 512M"), std::string::npos) << server_->log();

  EXPECT_EQ(allocate("newcomer", "256M"), 0u);
  nlohmann::json total;
  ASSERT_NO_FATAL_FAILURE(only_total(total));
  EXPECT_EQ(total["total"], 512 * kMiB);
  EXPECT_EQ(total["used"], 640 * kMiB);  // nothing taken away
  holder.signal(SIGKILL);
  wait_for_program(holder, kProgramTimeout);
}

TEST_F(MemoryTotals, AServerStartedAnewCountsWhatRunningTenantsHoldBeforeGrantingMore) {
  write_policy(my_user() + "memory_total = \"1G\"\n");
  start_server();
  gpulimit::testing::Process holder = start_allocator("holder", "640M", 60);
  EXPECT_EQ(held_by("holder"), 640 * kMiB);

  // The server dies; a new one knows nothing of the leases the old gave.
  ::kill(server_->pid(), SIGKILL);
  server_->wait_for_exit(kProgramTimeout);
  start_server();
  // The holder's process joins the new server by itself (its connection
  // watcher), and the new server reads what its ledger holds.
  const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
  bool rejoined = false;
  while (!rejoined && std::chrono::steady_clock::now() < deadline) {
    if (const std::optional<nlohmann::json> report = status())
      for (const nlohmann::json& total : (*report)["memory_totals"])
        rejoined = rejoined || total["used"] == 640 * kMiB;
    if (!rejoined) std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_TRUE(rejoined) << server_->log();

  EXPECT_EQ(allocate("newcomer", "3G"), 384 * kMiB) << server_->log();
  holder.signal(SIGKILL);
  wait_for_program(holder, kProgramTimeout);
}

TEST_F(MemoryTotalsOnTwoGpus, ATotalOfAllDevicesCountsWhatIsHeldOnEach) {
  write_policy(my_group() + "memory_total_all = \"1G\"\n");
  start_server();
  gpulimit::testing::Process first = start_allocator("first", "640M", 60, 0);
  EXPECT_EQ(held_by("first"), 640 * kMiB);

  EXPECT_EQ(allocate("second", "3G", 1), 384 * kMiB) << server_->log();
  nlohmann::json total;
  ASSERT_NO_FATAL_FAILURE(only_total(total));
  EXPECT_EQ(total["board_index"], nullptr);
  EXPECT_EQ(total["used"], 640 * kMiB);
  first.signal(SIGKILL);
  wait_for_program(first, kProgramTimeout);
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" as its 16 bytes.
Uuid uuid_bytes(const std::string& text) {
  Uuid uuid{};
  std::string hex;
  for (const char c : text.substr(4))
    if (c != '-') hex += c;
  for (std::size_t i = 0; i < uuid.size() && 2 * i + 1 < hex.size(); ++i)
    uuid[i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return uuid;
}

TEST_F(MemoryTotals, AHostileTenantCanNeitherHogTheTotalNorNameAnotherDevice) {
  write_policy(my_user() + "memory_total = \"1G\"\n");
  start_server();
  gpulimit::testing::Process holder = start_allocator("holder", "640M", 60);
  EXPECT_EQ(held_by("holder"), 640 * kMiB);
  const std::optional<nlohmann::json> before = status();
  ASSERT_TRUE(before && !(*before)["devices"].empty());

  // A client of the same user speaking the protocol by hand: it makes no
  // ledger and asks for everything, then for what is left, which it never
  // uses.
  TestClient hostile(server_->socket());
  HelloOptions hello;
  hello.tenant = "hostile";
  hello.ledger_dir = dir_.path();
  hello.uuids = {uuid_bytes((*before)["devices"][0]["uuid"].get<std::string>())};
  ASSERT_TRUE(hostile.hello(hello)) << hostile.refusal() << server_->log();
  EXPECT_EQ(hostile.welcome().leased_devices, 1u);
  EXPECT_EQ(hostile.welcome().memory_cap[0], 1024 * kMiB) << "its cap is the total";
  for (const uint64_t need : {UINT64_MAX, 384 * kMiB}) {
    auto request = gpulimit::protocol::make<gpulimit::protocol::LeaseRequest>();
    request.board_device = hostile.device(0);
    request.need = need;
    ASSERT_TRUE(hostile.send_raw(&request, sizeof request));
  }
  const auto deadline = std::chrono::steady_clock::now() + kProgramTimeout;
  uint64_t promised = 0;
  while (promised < 640 * kMiB + 384 * kMiB && std::chrono::steady_clock::now() < deadline) {
    if (const std::optional<nlohmann::json> report = status())
      if (!(*report)["memory_totals"].empty())
        promised = (*report)["memory_totals"][0]["promised"].get<uint64_t>();
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(promised, 1024 * kMiB) << "the second request granted, the first refused";

  // What it was leased and does not hold goes to a tenant that needs it.
  EXPECT_EQ(allocate("newcomer", "3G"), 384 * kMiB) << server_->log();

  // A device its Hello did not name: the connection is closed.
  auto stray = gpulimit::protocol::make<gpulimit::protocol::LeaseRequest>();
  stray.board_device = 15;
  stray.need = kMiB;
  ASSERT_TRUE(hostile.send_raw(&stray, sizeof stray));
  EXPECT_TRUE(hostile.closed_by_server());
  EXPECT_TRUE(status().has_value()) << "the server goes on serving";
  holder.signal(SIGKILL);
  wait_for_program(holder, kProgramTimeout);
}

}  // namespace
}  // namespace server_test
