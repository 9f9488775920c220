// gpulimitd as its clients meet it: Hello and Welcome, refusals, and every
// kind of bad message, each from a real connection to a real server, which
// must go on serving everyone else.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/messages.h"
#include "gpulimit/shm/board.h"
#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "test_client.h"

namespace server_test {
namespace {

namespace protocol = gpulimit::protocol;
namespace shm = gpulimit::shm;

class ServerProtocol : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServerProcess>(dir_.path());
    ASSERT_TRUE(server_->wait_until_serving()) << server_->log();
  }

  // A tenant that connects after the bad client and must be served as if
  // nothing happened: welcomed, and granted the token it wants.
  void expect_server_still_serves(const std::string& tenant = "bystander") {
    TestClient bystander(server_->socket());
    HelloOptions options;
    options.tenant = tenant;
    ASSERT_TRUE(bystander.hello(options)) << bystander.refusal() << "\n" << server_->log();
    ASSERT_TRUE(bystander.want(bystander.device()));
    EXPECT_TRUE(bystander.wait_until_held(bystander.device())) << server_->log();
  }

  gpulimit::testing::TemporaryDirectory dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ServerProtocol, WelcomesWithTheBoardAndAnIndexPerUuid) {
  TestClient first(server_->socket());
  TestClient second(server_->socket());
  HelloOptions both_gpus;
  both_gpus.uuids = {kGpu0, kGpu1};
  HelloOptions reversed;
  reversed.tenant = "tenant-b";
  reversed.uuids = {kGpu1, kGpu0};

  ASSERT_TRUE(first.hello(both_gpus)) << first.refusal();
  ASSERT_TRUE(second.hello(reversed)) << second.refusal();

  EXPECT_EQ(first.welcome().device_count, 2u);
  EXPECT_NE(first.device(0), first.device(1));
  EXPECT_EQ(second.device(0), first.device(1));
  EXPECT_EQ(second.device(1), first.device(0));
  const shm::BoardLayout& board = first.board();
  EXPECT_EQ(board.device_count.load(), 2u);
  EXPECT_EQ(std::memcmp(board.devices[first.device(0)].uuid, kGpu0.data(), 16), 0);
  EXPECT_EQ(std::memcmp(board.devices[first.device(1)].uuid, kGpu1.data(), 16), 0);
  EXPECT_EQ(board.server_pid, server_->pid());
  EXPECT_EQ(board.quantum_us, 20'000u);
  EXPECT_NE(first.tenant(), second.tenant());
}

TEST_F(ServerProtocol, ProcessesOfOneTenantShareItsNumberWhichIsNeverReused) {
  auto first = std::make_unique<TestClient>(server_->socket());
  TestClient second(server_->socket());
  TestClient other(server_->socket());
  HelloOptions other_tenant;
  other_tenant.tenant = "tenant-b";

  ASSERT_TRUE(first->hello());
  ASSERT_TRUE(second.hello());
  ASSERT_TRUE(other.hello(other_tenant));
  EXPECT_EQ(first->tenant(), second.tenant());
  EXPECT_NE(first->tenant(), other.tenant());
  const uint32_t old_number = first->tenant();

  first.reset();
  TestClient later(server_->socket());
  ASSERT_TRUE(later.hello());
  EXPECT_EQ(later.tenant(), old_number) << "the tenant still has a process";
}

TEST_F(ServerProtocol, ATenantThatLeftComesBackWithANewNumber) {
  uint32_t old_number;
  {
    TestClient first(server_->socket());
    ASSERT_TRUE(first.hello());
    old_number = first.tenant();
  }
  // The server sees the close; a status round trip orders us after it.
  TestClient probe(server_->socket());
  for (int i = 0; i < 1000; ++i) {
    auto status = probe.status();
    ASSERT_TRUE(status);
    if ((*status)["tenants"].empty()) break;
  }

  TestClient again(server_->socket());
  ASSERT_TRUE(again.hello());

  EXPECT_GT(again.tenant(), old_number);
}

TEST_F(ServerProtocol, TheBoardDescriptorIsReadOnly) {
  std::string error;
  const int fd = protocol::connect_to(server_->socket(), error);
  ASSERT_GE(fd, 0) << error;
  const protocol::Hello hello = make_hello({});
  ASSERT_TRUE(protocol::send_message(fd, &hello, sizeof hello));
  std::vector<unsigned char> answer(protocol::kMaxMessageSize);
  int board = -1;
  ASSERT_GT(protocol::receive_message(fd, answer.data(), answer.size(), &board), 0);
  ASSERT_GE(board, 0);

  EXPECT_EQ(fcntl(board, F_GETFL) & O_ACCMODE, O_RDONLY);
  void* writable =
      mmap(nullptr, sizeof(shm::BoardLayout), PROT_READ | PROT_WRITE, MAP_SHARED, board, 0);
  EXPECT_EQ(writable, MAP_FAILED);
  EXPECT_EQ(ftruncate(board, 0), -1) << "a client cannot shrink the board under the server";
  close(board);
  close(fd);
}

TEST_F(ServerProtocol, RefusesAClaimedPidThatIsNotThePeers) {
  TestClient liar(server_->socket());
  HelloOptions options;
  options.claimed_pid = getpid() + 1;

  EXPECT_FALSE(liar.hello(options));

  EXPECT_NE(liar.refusal().find("claims pid " + std::to_string(getpid() + 1)), std::string::npos)
      << liar.refusal();
  EXPECT_TRUE(liar.closed_by_server());
  expect_server_still_serves();
}

TEST_F(ServerProtocol, RefusesAnotherProtocolVersionNamingBoth) {
  TestClient newer(server_->socket());
  protocol::Hello hello = make_hello({});
  hello.header.version = protocol::kVersion + 1;
  ASSERT_TRUE(newer.send_raw(&hello, sizeof hello));

  EXPECT_TRUE(newer.closed_by_server());
  // closed_by_server() read the Refused on its way; ask again to see it.
  TestClient again(server_->socket());
  std::vector<unsigned char> bigger(sizeof hello + 100);  // a newer Hello may be longer
  std::memcpy(bigger.data(), &hello, sizeof hello);
  protocol::Header header;
  std::memcpy(&header, bigger.data(), sizeof header);
  header.size = static_cast<uint32_t>(bigger.size());
  std::memcpy(bigger.data(), &header, sizeof header);
  ASSERT_TRUE(again.send_raw(bigger.data(), bigger.size()));
  std::vector<unsigned char> answer(protocol::kMaxMessageSize);
  const ssize_t got = protocol::receive_message(again.fd(), answer.data(), answer.size(), nullptr);
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof(protocol::Refused)));
  protocol::Refused refused;
  std::memcpy(&refused, answer.data(), sizeof refused);
  const std::string reason = refused.reason;

  EXPECT_NE(reason.find("version " + std::to_string(protocol::kVersion)), std::string::npos)
      << reason;
  EXPECT_NE(reason.find("version " + std::to_string(protocol::kVersion + 1)), std::string::npos)
      << reason;
  expect_server_still_serves();
}

struct BadHello {
  const char* name;
  void (*spoil)(protocol::Hello&);
  const char* reason_mentions;
};

class ServerRefusesBadHello : public ServerProtocol,
                              public ::testing::WithParamInterface<BadHello> {};

TEST_P(ServerRefusesBadHello, WithOneLineAndGoesOnServing) {
  TestClient client(server_->socket());
  protocol::Hello hello = make_hello({});
  GetParam().spoil(hello);
  ASSERT_TRUE(client.send_raw(&hello, sizeof hello));

  std::vector<unsigned char> answer(protocol::kMaxMessageSize);
  const ssize_t got = protocol::receive_message(client.fd(), answer.data(), answer.size(), nullptr);
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof(protocol::Refused))) << server_->log();
  protocol::Refused refused;
  std::memcpy(&refused, answer.data(), sizeof refused);
  const std::string reason = refused.reason;

  EXPECT_NE(reason.find(GetParam().reason_mentions), std::string::npos) << reason;
  EXPECT_EQ(reason.find('\n'), std::string::npos) << "one line";
  EXPECT_TRUE(client.closed_by_server());
  expect_server_still_serves();
}

INSTANTIATE_TEST_SUITE_P(
    Fields, ServerRefusesBadHello,
    ::testing::Values(
        BadHello{"TenantWithSlash", [](protocol::Hello& h) { std::strcpy(h.tenant, "a/b"); },
                 "tenant id 'a/b'"},
        BadHello{"EmptyTenant", [](protocol::Hello& h) { h.tenant[0] = '\0'; }, "tenant id"},
        BadHello{"UnterminatedTenant",
                 [](protocol::Hello& h) { std::memset(h.tenant, 'x', sizeof h.tenant); },
                 "not NUL-terminated"},
        BadHello{"WeightZero", [](protocol::Hello& h) { h.weight = 0; }, "weight 0"},
        BadHello{"WeightTooHigh", [](protocol::Hello& h) { h.weight = 1001; }, "weight 1001"},
        BadHello{"SmAbove100", [](protocol::Hello& h) { h.sm_percent = 101; }, "sm 101"},
        BadHello{"UnknownPriority",
                 [](protocol::Hello& h) { h.priority = static_cast<protocol::Priority>(7); },
                 "priority 7"},
        BadHello{"TooManyDevices", [](protocol::Hello& h) { h.device_count = 17; }, "17 GPUs"},
        BadHello{"RelativeLedgerDir",
                 [](protocol::Hello& h) { std::strcpy(h.ledger_dir, "dev/shm"); },
                 "not an absolute path"},
        BadHello{"UnterminatedLedgerDir",
                 [](protocol::Hello& h) { std::memset(h.ledger_dir, '/', sizeof h.ledger_dir); },
                 "ledger directory is not NUL-terminated"},
        BadHello{"ControlCharacterInLedgerDir",
                 [](protocol::Hello& h) { std::strcpy(h.ledger_dir, "/dev/shm\n/x"); },
                 "control character"}),
    [](const ::testing::TestParamInfo<BadHello>& param) { return std::string(param.param.name); });

struct BadPacket {
  const char* name;
  std::vector<unsigned char> (*build)();
};

std::vector<unsigned char> bytes_of(const void* data, std::size_t size) {
  const auto* begin = static_cast<const unsigned char*>(data);
  return {begin, begin + size};
}

class ServerClosesOnBadPacket : public ServerProtocol,
                                public ::testing::WithParamInterface<BadPacket> {};

TEST_P(ServerClosesOnBadPacket, AndGoesOnServing) {
  // A tenant holding the token while the bad packet arrives keeps it.
  TestClient holder(server_->socket());
  ASSERT_TRUE(holder.hello());
  ASSERT_TRUE(holder.want(holder.device()));
  ASSERT_TRUE(holder.wait_until_held(holder.device()));
  TestClient bad(server_->socket());
  const std::vector<unsigned char> packet = GetParam().build();

  // An oversized packet needs a larger send buffer than the default.
  const int buffer = static_cast<int>(packet.size() + 65536);
  setsockopt(bad.fd(), SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
  ASSERT_TRUE(bad.send_raw(packet.data(), packet.size())) << std::strerror(errno);

  EXPECT_TRUE(bad.closed_by_server()) << server_->log();
  EXPECT_EQ(holder.token(holder.device()), shm::token_held(holder.tenant()));
  expect_server_still_serves();
}

INSTANTIATE_TEST_SUITE_P(
    Packets, ServerClosesOnBadPacket,
    ::testing::Values(BadPacket{"Garbage",
                                [] {
                                  std::vector<unsigned char> noise(333);
                                  std::mt19937 random(42);
                                  for (auto& byte : noise)
                                    byte = static_cast<unsigned char>(random());
                                  return noise;
                                }},
                      BadPacket{"ShorterThanAHeader",
                                [] {
                                  return std::vector<unsigned char>{1, 2, 3};
                                }},
                      BadPacket{"TruncatedHello",
                                [] {
                                  const protocol::Hello hello = make_hello({});
                                  return bytes_of(&hello, sizeof hello / 2);
                                }},
                      BadPacket{"Oversized",
                                [] {
                                  std::vector<unsigned char> huge(protocol::kMaxMessageSize + 4096);
                                  const protocol::Hello hello = make_hello({});
                                  std::memcpy(huge.data(), &hello, sizeof hello);
                                  return huge;
                                }},
                      BadPacket{"UnknownType",
                                [] {
                                  auto want = protocol::make<protocol::Want>();
                                  want.header.type = static_cast<protocol::Type>(99);
                                  return bytes_of(&want, sizeof want);
                                }},
                      BadPacket{"WantBeforeHello",
                                [] {
                                  const auto want = protocol::make<protocol::Want>();
                                  return bytes_of(&want, sizeof want);
                                }},
                      BadPacket{"WelcomeFromAClient",
                                [] {
                                  const auto welcome = protocol::make<protocol::Welcome>();
                                  return bytes_of(&welcome, sizeof welcome);
                                }}),
    [](const ::testing::TestParamInfo<BadPacket>& param) { return std::string(param.param.name); });

TEST_F(ServerProtocol, ClosesATenantThatNamesADeviceItDidNotAnnounce) {
  TestClient client(server_->socket());
  ASSERT_TRUE(client.hello());

  ASSERT_TRUE(client.want(client.device() + 5));

  EXPECT_TRUE(client.closed_by_server());
  EXPECT_NE(server_->log().find("which its Hello did not"), std::string::npos);
  expect_server_still_serves();
}

TEST_F(ServerProtocol, ClosesASecondHello) {
  TestClient client(server_->socket());
  ASSERT_TRUE(client.hello());

  const protocol::Hello again = make_hello({});
  ASSERT_TRUE(client.send_raw(&again, sizeof again));

  EXPECT_TRUE(client.closed_by_server());
  expect_server_still_serves();
}

TEST_F(ServerProtocol, DropsAnAckForTheWrongGrantButKeepsTheConnection) {
  TestClient client(server_->socket());
  ASSERT_TRUE(client.hello());
  ASSERT_TRUE(client.want(client.device()));
  const auto grant = client.wait_until_held(client.device());
  ASSERT_TRUE(grant);

  ASSERT_TRUE(client.ack(client.device(), *grant + 7));
  ASSERT_TRUE(client.idle(client.device(), *grant + 7));
  ASSERT_TRUE(client.ack(client.device(), *grant + 8));

  EXPECT_FALSE(client.closed_by_server(std::chrono::milliseconds(200)));
  EXPECT_EQ(client.token(client.device()), shm::token_held(client.tenant()));
  const std::string log = server_->log();
  const std::string said = "which is not current";
  ASSERT_NE(log.find(said), std::string::npos) << log;
  EXPECT_EQ(log.find(said, log.find(said) + 1), std::string::npos) << "said once";
}

TEST_F(ServerProtocol, AnswersStatusWithoutHelloAndClosesOtherMessagesThere) {
  TestClient status_client(server_->socket());

  const auto status = status_client.status();
  ASSERT_TRUE(status);
  EXPECT_EQ((*status)["server"]["pid"], server_->pid());
  ASSERT_TRUE(status_client.want(0));

  EXPECT_TRUE(status_client.closed_by_server());
}

}  // namespace
}  // namespace server_test
