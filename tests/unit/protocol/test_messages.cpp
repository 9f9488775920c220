// The wire protocol: what a well-formed message is, and one message at a
// time over a real SOCK_SEQPACKET pair, descriptors included.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <vector>

#include "gpulimit/protocol/channel.h"
#include "gpulimit/protocol/messages.h"

namespace gpulimit::protocol {
namespace {

TEST(ProtocolCheck, AWellFormedMessageOfEachFixedType) {
  const auto want = make<Want>();
  const auto hello = make<Hello>();
  const auto ack = make<Ack>();

  EXPECT_EQ(check(&want, sizeof want), Problem::kNone);
  EXPECT_EQ(check(&hello, sizeof hello), Problem::kNone);
  EXPECT_EQ(check(&ack, sizeof ack), Problem::kNone);
}

TEST(ProtocolCheck, NamesWhatIsWrong) {
  auto sut = make<Want>();
  EXPECT_EQ(check(&sut, sizeof(Header) - 1), Problem::kTruncated);
  EXPECT_EQ(check(nullptr, 0), Problem::kTruncated);
  EXPECT_EQ(check(&sut, sizeof sut - 1), Problem::kTruncated);  // shorter than it says

  auto bad_magic = sut;
  bad_magic.header.magic = 0x12345678;
  EXPECT_EQ(check(&bad_magic, sizeof bad_magic), Problem::kBadMagic);

  auto other_version = sut;
  other_version.header.version = kVersion + 1;
  EXPECT_EQ(check(&other_version, sizeof other_version), Problem::kOtherVersion);

  auto unknown = sut;
  unknown.header.type = static_cast<Type>(999);
  EXPECT_EQ(check(&unknown, sizeof unknown), Problem::kUnknownType);

  // A Want that claims the size of an Ack, and is that long.
  std::array<unsigned char, sizeof(Ack)> padded{};
  auto oversized = sut;
  oversized.header.size = sizeof padded;
  std::memcpy(padded.data(), &oversized, sizeof oversized);
  EXPECT_EQ(check(padded.data(), padded.size()), Problem::kWrongSize);
}

TEST(ProtocolCheck, AStatusReplyCarriesABodyOfAnyLength) {
  const std::string body = R"({"tenants":[]})";
  std::vector<unsigned char> sut(sizeof(StatusReply) + body.size());
  const Header header{kMagic, kVersion, Type::kStatusReply, static_cast<uint32_t>(sut.size()), 0};
  std::memcpy(sut.data(), &header, sizeof header);
  std::memcpy(sut.data() + sizeof header, body.data(), body.size());

  EXPECT_EQ(check(sut.data(), sut.size()), Problem::kNone);
}

class Channel : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends_), 0);
  }
  void TearDown() override {
    ::close(ends_[0]);
    ::close(ends_[1]);
  }
  int ends_[2] = {-1, -1};
};

TEST_F(Channel, OneMessageAtATimeWithItsBoundaries) {
  auto first = make<Want>();
  first.board_device = 3;
  auto second = make<Ack>();
  second.board_device = 4;
  second.grant = 17;
  ASSERT_TRUE(send_message(ends_[0], &first, sizeof first));
  ASSERT_TRUE(send_message(ends_[0], &second, sizeof second));

  std::array<unsigned char, 512> buffer{};
  int fd = 0;
  ASSERT_EQ(receive_message(ends_[1], buffer.data(), buffer.size(), &fd), ssize_t{sizeof first});
  EXPECT_EQ(fd, -1);
  Want got_first;
  std::memcpy(&got_first, buffer.data(), sizeof got_first);
  EXPECT_EQ(got_first.board_device, 3u);
  ASSERT_EQ(receive_message(ends_[1], buffer.data(), buffer.size(), &fd), ssize_t{sizeof second});
  Ack got_second;
  std::memcpy(&got_second, buffer.data(), sizeof got_second);
  EXPECT_EQ(got_second.grant, 17u);
}

TEST_F(Channel, PassesADescriptor) {
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  const auto welcome = make<Welcome>();
  ASSERT_TRUE(send_message(ends_[0], &welcome, sizeof welcome, pipe_ends[1]));
  ::close(pipe_ends[1]);

  std::array<unsigned char, 512> buffer{};
  int fd = -1;
  ASSERT_EQ(receive_message(ends_[1], buffer.data(), buffer.size(), &fd), ssize_t{sizeof welcome});
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  ASSERT_EQ(::write(fd, "x", 1), 1);  // the other end of our own pipe
  char c = 0;
  EXPECT_EQ(::read(pipe_ends[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  ::close(fd);
  ::close(pipe_ends[0]);
}

TEST_F(Channel, AWelcomeCarriesTheGrantedMemoryCapsAndTheNotice) {
  auto welcome = make<Welcome>();
  welcome.device_count = 2;
  welcome.memory_cap[1] = uint64_t{20} << 30;
  std::strncpy(welcome.notice, "the policy lowers --sm 80 to 50", sizeof welcome.notice - 1);
  ASSERT_TRUE(send_message(ends_[0], &welcome, sizeof welcome));

  Welcome got{};
  ASSERT_EQ(receive_message(ends_[1], &got, sizeof got, nullptr), ssize_t{sizeof got});

  EXPECT_EQ(check(&got, sizeof got), Problem::kNone);
  EXPECT_EQ(got.memory_cap[0], 0u);
  EXPECT_EQ(got.memory_cap[1], uint64_t{20} << 30);
  EXPECT_STREQ(got.notice, "the policy lowers --sm 80 to 50");
}

TEST(ProtocolCheck, AClientOfTheFirstVersionWithoutMemoryFieldsIsOfAnotherVersion) {
  auto sut = make<Hello>();
  sut.header.version = 1;

  EXPECT_EQ(check(&sut, sizeof sut), Problem::kOtherVersion);
  EXPECT_GE(kVersion, 2);
}

TEST_F(Channel, ADescriptorNobodyAskedForIsClosed) {
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  const auto want = make<Want>();
  ASSERT_TRUE(send_message(ends_[0], &want, sizeof want, pipe_ends[1]));
  ::close(pipe_ends[1]);

  std::array<unsigned char, 512> buffer{};
  ASSERT_EQ(receive_message(ends_[1], buffer.data(), buffer.size(), nullptr), ssize_t{sizeof want});
  // Every write end is closed now: the read end sees end of file.
  char c;
  EXPECT_EQ(::read(pipe_ends[0], &c, 1), 0);
  ::close(pipe_ends[0]);
}

TEST_F(Channel, AnOversizedMessageIsDroppedWholeAndTheNextOneArrives) {
  std::vector<unsigned char> big(4096, 0xab);
  const auto want = make<Want>();
  ASSERT_TRUE(send_message(ends_[0], big.data(), big.size()));
  ASSERT_TRUE(send_message(ends_[0], &want, sizeof want));

  std::array<unsigned char, 512> buffer{};
  EXPECT_EQ(receive_message(ends_[1], buffer.data(), buffer.size(), nullptr), -1);
  EXPECT_EQ(receive_message(ends_[1], buffer.data(), buffer.size(), nullptr), ssize_t{sizeof want});
  EXPECT_EQ(check(buffer.data(), sizeof want), Problem::kNone);
}

TEST_F(Channel, AClosedPeerReadsAsZeroAndSendingFailsWithoutSigpipe) {
  ::close(ends_[0]);
  ends_[0] = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);  // keep TearDown's close harmless

  std::array<unsigned char, 64> buffer{};
  EXPECT_EQ(receive_message(ends_[1], buffer.data(), buffer.size(), nullptr), 0);
  const auto want = make<Want>();
  EXPECT_FALSE(send_message(ends_[1], &want, sizeof want));  // EPIPE, and we are still here
}

TEST_F(Channel, PeerCredentialsAreTheKernelsWord) {
  PeerCredentials sut;
  ASSERT_TRUE(peer_credentials(ends_[1], sut));
  EXPECT_EQ(sut.pid, ::getpid());
  EXPECT_EQ(sut.uid, ::getuid());
  EXPECT_EQ(sut.gid, ::getgid());
}

TEST(SocketPath, PerUserUnderTheRuntimeDirectoryElseTmp) {
  char runtime[] = "XDG_RUNTIME_DIR=/run/user/1000";
  char other[] = "HOME=/home/a";
  char* with_runtime[] = {other, runtime, nullptr};
  char* without[] = {other, nullptr};

  EXPECT_EQ(user_socket_path(with_runtime, 1000), "/run/user/1000/gpulimit/gpulimitd.sock");
  EXPECT_EQ(user_socket_path(without, 1000), "/tmp/gpulimit-1000/gpulimitd.sock");
  EXPECT_EQ(user_socket_path(nullptr, 7), "/tmp/gpulimit-7/gpulimitd.sock");
}

TEST(SocketPath, NobodyListeningIsOneLine) {
  std::string error;
  EXPECT_EQ(connect_to("/nonexistent/gpulimitd.sock", error), -1);
  EXPECT_NE(error.find("/nonexistent/gpulimitd.sock"), std::string::npos);
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace gpulimit::protocol
