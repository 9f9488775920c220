// Hostile clients that try to take what every tenant needs from gpulimitd:
// its device table (the board's kBoardDevices slots, shared by every user
// of the machine) and its descriptors. After each attack a real tenant must
// still join and be gated: welcomed with its device on the board, and
// granted the token when it asks. Bounds are generous: only a wedged or
// full server reaches them.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "forked_process.h"
#include "gpulimit/testing/simulated_machine.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "test_client.h"

namespace server_test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kPatience{10'000};
constexpr uint32_t kBoardSlots = gpulimit::shm::kBoardDevices;

// The simulator's GPU `index` (tests/fakecuda: fa4ec0da-0000-4000-8000-...
// ending in the index), as its NVML and its driver name it.
Uuid simulated_gpu(uint8_t index) {
  return {0xfa, 0x4e, 0xc0, 0xda, 0x00, 0x00, 0x40, 0x00,
          0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, index};
}

// `count` GPUs no machine has, distinct for each `series`.
std::vector<Uuid> made_up_gpus(uint8_t series, uint32_t count) {
  std::vector<Uuid> uuids;
  for (uint32_t i = 0; i < count; ++i)
    uuids.push_back({0xde, 0xad, 0xbe, 0xef, series, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                     static_cast<unsigned char>(i)});
  return uuids;
}

// A Hello of tenant `tenant` naming `uuids`.
HelloOptions naming(const std::string& tenant, std::vector<Uuid> uuids) {
  HelloOptions options;
  options.tenant = tenant;
  options.uuids = std::move(uuids);
  return options;
}

// The board devices the server's status lists (the slots in use).
std::size_t devices_in_status(const std::string& socket) {
  TestClient asker(socket);
  const std::optional<nlohmann::json> status = asker.status();
  return status ? (*status)["devices"].size() : SIZE_MAX;
}

// Waits until the status lists `count` devices; false after the timeout.
bool wait_for_devices(const std::string& socket, std::size_t count) {
  const auto deadline = Clock::now() + kPatience;
  while (Clock::now() < deadline) {
    if (devices_in_status(socket) == count) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

// A tenant that is gated: welcomed with `uuid` on the board, and given the
// token when it asks.
::testing::AssertionResult joins_and_is_gated(const std::string& socket, const Uuid& uuid,
                                              const std::string& tenant) {
  TestClient client(socket);
  if (!client.connected()) return ::testing::AssertionFailure() << "cannot connect";
  if (!client.hello(naming(tenant, {uuid})))
    return ::testing::AssertionFailure() << "not welcomed: " << client.refusal();
  const uint32_t device = client.device();
  if (device >= client.board().device_count.load() ||
      std::memcmp(client.board().devices[device].uuid, uuid.data(), uuid.size()) != 0)
    return ::testing::AssertionFailure() << "its device is not on the board at " << device;
  if (!client.want(device) || !client.wait_until_held(device))
    return ::testing::AssertionFailure() << "never granted device " << device;
  return ::testing::AssertionSuccess();
}

gpulimit::testing::MachineShape two_gpus() {
  gpulimit::testing::MachineShape shape;
  shape.devices = 2;
  return shape;
}

// A server whose NVML lists the GPUs of a simulated machine of two.
class MachineDeviceTable : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerLaunch launch;
    launch.environment = machine_.assignments();
    server_ = std::make_unique<ServerProcess>(dir_.path(), launch);
    ASSERT_TRUE(server_->wait_until_serving()) << server_->log();
  }

  gpulimit::testing::TemporaryDirectory dir_;
  gpulimit::testing::SimulatedMachine machine_{two_gpus()};
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(MachineDeviceTable, MadeUpGpusAreRefusedAndARealTenantIsStillGated) {
  // Hellos naming kBoardSlots made-up GPUs each, their connections kept open.
  std::vector<std::unique_ptr<TestClient>> flood;
  for (uint8_t series = 0; series < 4; ++series) {
    flood.push_back(std::make_unique<TestClient>(server_->socket()));
    EXPECT_FALSE(flood.back()->hello(
        naming("flood-" + std::to_string(series), made_up_gpus(series, kBoardSlots))))
        << "a Hello of made-up GPUs was welcomed";
    EXPECT_NE(flood.back()->refusal().find("not one of the 2 GPUs"), std::string::npos)
        << flood.back()->refusal();
  }
  EXPECT_EQ(devices_in_status(server_->socket()), 0u) << server_->log();

  EXPECT_TRUE(joins_and_is_gated(server_->socket(), simulated_gpu(0), "real")) << server_->log();
  EXPECT_TRUE(joins_and_is_gated(server_->socket(), simulated_gpu(1), "real-too"))
      << server_->log();
}

TEST_F(MachineDeviceTable, AHelloWithOneMadeUpGpuAmongRealOnesWritesNoSlot) {
  TestClient mixed(server_->socket());
  std::vector<Uuid> uuids = {simulated_gpu(0), simulated_gpu(1)};
  uuids.push_back(made_up_gpus(9, 1).front());
  EXPECT_FALSE(mixed.hello(naming("mixed", uuids)));
  EXPECT_EQ(devices_in_status(server_->socket()), 0u) << server_->log();
}

// A per-user server where NVML lists no GPU (none loadable): it serves the
// devices its own user's processes name, and must still free what they
// leave and write nothing for a Hello it refuses.
class TrustedDeviceTable : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(dir_.path());
    ASSERT_TRUE(server_->wait_until_serving()) << server_->log();
    if (server_->log().find("NVML lists") != std::string::npos)
      GTEST_SKIP() << "this machine's own NVML lists GPUs; these tests need a server without";
  }

  gpulimit::testing::TemporaryDirectory dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(TrustedDeviceTable, ARefusedHelloLeavesNoSlotBehind) {
  TestClient holder(server_->socket());
  ASSERT_TRUE(holder.hello(naming("ten", made_up_gpus(1, 10)))) << holder.refusal();
  // 6 slots are free, and this Hello names 10 more devices: refused whole.
  TestClient greedy(server_->socket());
  EXPECT_FALSE(greedy.hello(naming("greedy", made_up_gpus(2, 10))));
  EXPECT_EQ(devices_in_status(server_->socket()), 10u) << server_->log();
  // So the 6 free slots still take 6 new devices.
  TestClient fitting(server_->socket());
  EXPECT_TRUE(fitting.hello(naming("fitting", made_up_gpus(3, 6))))
      << fitting.refusal() << server_->log();
}

TEST_F(TrustedDeviceTable, SlotsComeBackAfterTheirTenantsLeave) {
  {
    TestClient filler(server_->socket());
    ASSERT_TRUE(filler.hello(naming("filler", made_up_gpus(1, kBoardSlots)))) << filler.refusal();
    ASSERT_EQ(devices_in_status(server_->socket()), kBoardSlots);
  }  // its connection closes
  ASSERT_TRUE(wait_for_devices(server_->socket(), 0)) << server_->log();

  TestClient next(server_->socket());
  ASSERT_TRUE(next.hello(naming("next", made_up_gpus(2, kBoardSlots))))
      << next.refusal() << server_->log();
  // Every slot is the new device's: the old UUIDs are gone from the board.
  const std::vector<Uuid> uuids = made_up_gpus(2, kBoardSlots);
  for (uint32_t i = 0; i < kBoardSlots; ++i)
    EXPECT_EQ(std::memcmp(next.board().devices[next.device(i)].uuid, uuids[i].data(), 16), 0);
  ASSERT_TRUE(next.want(next.device(kBoardSlots - 1)));
  EXPECT_TRUE(next.wait_until_held(next.device(kBoardSlots - 1))) << server_->log();
}

// A user at its limit is turned away at once, with the reason; a process
// that said Hello and closed its connection but lives on still counts (the
// server keeps its pidfd), and its exit gives the room back.
TEST(ConnectionLimit, ProcessesThatLeftButLiveOnCountUntilTheyExit) {
  gpulimit::testing::TemporaryDirectory dir;
  const gpulimit::testing::SimulatedMachine machine;
  ServerLaunch launch;
  launch.options = {"--max-connections-per-uid", "2"};
  launch.environment = machine.assignments();
  ServerProcess server(dir.path(), launch);
  ASSERT_TRUE(server.wait_until_serving()) << server.log();

  const auto hello_and_leave = [socket = server.socket()](ParentLine& parent) {
    {
      TestClient client(socket);
      if (!client.hello(naming("lingering", {simulated_gpu(0)}))) return 2;
    }  // its connection closes; the process lives on
    parent.say("left");
    for (;;)
      pause();
  };
  ForkedProcess first(hello_and_leave);
  ASSERT_EQ(first.expect("left"), "left") << server.log();
  ForkedProcess second(hello_and_leave);
  ASSERT_EQ(second.expect("left"), "left") << server.log();

  TestClient over(server.socket());
  EXPECT_FALSE(over.hello(naming("over", {simulated_gpu(0)})));
  EXPECT_NE(over.refusal().find("--max-connections-per-uid"), std::string::npos)
      << over.refusal() << server.log();

  first.kill_now();
  bool welcomed = false;
  for (const auto until = Clock::now() + kPatience; !welcomed && Clock::now() < until;) {
    TestClient again(server.socket());
    welcomed = again.hello(naming("again", {simulated_gpu(0)}));
    if (!welcomed) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(welcomed) << server.log();
}

// Silent connections from uid nobody, opened as fast as the server closes
// them, past the server's descriptor limit.
constexpr uid_t kNobody = 65534;
constexpr uint64_t kServerDescriptors = 256;
constexpr int kFloodConnections = 2000;

int flood_connections(const std::string& socket, ParentLine& parent) {
  if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) return 10;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socket.c_str(), socket.size() + 1);
  std::vector<pollfd> open_ones;
  bool told = false;
  for (;;) {
    // Fill up to kFloodConnections, without blocking on a full queue.
    while (open_ones.size() < static_cast<std::size_t>(kFloodConnections)) {
      const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) break;
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        ::close(fd);
        break;
      }
      open_ones.push_back({fd, POLLIN, 0});
    }
    if (!told) {
      parent.say("flooding " + std::to_string(open_ones.size()));
      told = true;
    }
    // Replace those the server closed.
    ::poll(open_ones.data(), open_ones.size(), 10);
    std::erase_if(open_ones, [](const pollfd& entry) {
      if (entry.revents == 0) return false;
      ::close(entry.fd);
      return true;
    });
  }
}

TEST(ConnectionFlood, SilentConnectionsOfOneUserLeaveRoomForATenantOfAnother) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root, to flood as uid nobody";
  gpulimit::testing::TemporaryDirectory dir;
  const gpulimit::testing::SimulatedMachine machine;
  ServerLaunch launch;
  launch.environment = machine.assignments();
  launch.descriptor_limit = kServerDescriptors;
  ServerProcess server(dir.path(), launch);
  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  // Another user may connect (as to a system server's socket): every
  // directory above the socket is searchable by others.
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  for (std::string above = dir.path(); above.rfind('/') > 0;) {
    above.resize(above.rfind('/'));
    struct stat status {};
    if (::stat(above.c_str(), &status) != 0 || (status.st_mode & S_IXOTH) == 0)
      GTEST_SKIP() << above << " cannot be searched by other users";
  }
  ASSERT_EQ(::chmod(server.socket().c_str(), 0666), 0);

  ForkedProcess flooder(
      [socket = server.socket()](ParentLine& parent) { return flood_connections(socket, parent); });
  const std::string flooding = flooder.expect("flooding ");
  ASSERT_FALSE(flooding.empty()) << "the flooder did not start";
  // More silent connections than the server has descriptors.
  ASSERT_GT(std::stoi(flooding.substr(9)), static_cast<int>(kServerDescriptors)) << flooding;

  // The tenant joins in a thread: its connect waits while the server's
  // queue is full, and the flood goes on until the test stops it.
  std::future<::testing::AssertionResult> joined = std::async(std::launch::async, [&] {
    return joins_and_is_gated(server.socket(), simulated_gpu(0), "real");
  });
  const bool answered = joined.wait_for(kPatience * 2) == std::future_status::ready;
  flooder.kill_now();
  EXPECT_TRUE(answered) << "the tenant did not join within " << (kPatience * 2).count()
                        << " ms of a flood\n"
                        << server.log().substr(0, 4000);
  const ::testing::AssertionResult gated = joined.get();
  EXPECT_TRUE(answered && gated) << gated.message();
  EXPECT_EQ(::kill(server.pid(), 0), 0) << "the server died";
}

}  // namespace
}  // namespace server_test
