// Which gpulimitd a job or `gpulimit status` uses, with servers stood in for
// by sockets this process listens on. Starting one is the integration
// tests' (tests/integration/cli).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/server_choice.h"
#include "common/server_start.h"
#include "gpulimit/testing/temporary_directory.h"

namespace gpulimit::cli {
namespace {

// A socket that accepts connections (the kernel's backlog does) while it
// lives, as a server's does.
class Listener {
 public:
  explicit Listener(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0)
        << path << ": " << std::strerror(errno);
    EXPECT_EQ(::listen(fd_, 16), 0) << std::strerror(errno);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener() { ::close(fd_); }

 private:
  int fd_ = -1;
};

// A socket bound but not listening: what a server that died leaves behind.
void leave_stale_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ::close(fd);
}

class ServerChoice : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_EQ(::mkdir((dir_.path() + "/user").c_str(), 0700), 0);
    places_.caller = "";
    places_.system = dir_.path() + "/system.sock";
    places_.user = dir_.path() + "/user/gpulimitd.sock";
    places_.uid = ::getuid();
  }

  // With StartServer::kNo: nothing is ever started here.
  bool choose(std::string& socket, std::string& error) const {
    return choose_server(places_, StartServer::kNo, nullptr, socket, error);
  }

  gpulimit::testing::TemporaryDirectory dir_;
  ServerPlaces places_;
};

TEST_F(ServerChoice, TheCallersSocketFirst) {
  places_.caller = dir_.path() + "/caller.sock";
  const Listener caller(places_.caller), system(places_.system), user(places_.user);
  std::string socket, error;
  ASSERT_TRUE(choose(socket, error)) << error;
  EXPECT_EQ(socket, places_.caller);
}

TEST_F(ServerChoice, TheCallersSocketOrNone) {
  places_.caller = dir_.path() + "/caller.sock";
  const Listener system(places_.system), user(places_.user);
  std::string socket, error;
  EXPECT_FALSE(choose(socket, error));
  EXPECT_EQ(error,
            "nobody listens at GPULIMIT_SOCKET=" + places_.caller + " (No such file or directory)");

  leave_stale_socket(places_.caller);
  EXPECT_FALSE(choose(socket, error));
  EXPECT_EQ(error, "nobody listens at GPULIMIT_SOCKET=" + places_.caller + " (Connection refused)");
  // Never started there, even when asked to start one: it is not the user's.
  EXPECT_FALSE(choose_server(places_, StartServer::kOnDemand, nullptr, socket, error));
  EXPECT_EQ(socket, "");
}

TEST_F(ServerChoice, TheSystemServerBeforeTheUsersOwn) {
  const Listener system(places_.system), user(places_.user);
  std::string socket, error;
  ASSERT_TRUE(choose(socket, error)) << error;
  EXPECT_EQ(socket, places_.system);
}

TEST_F(ServerChoice, TheUsersOwnWithoutASystemServer) {
  leave_stale_socket(places_.system);
  const Listener user(places_.user);
  std::string socket, error;
  ASSERT_TRUE(choose(socket, error)) << error;
  EXPECT_EQ(socket, places_.user);
}

TEST_F(ServerChoice, NoneListeningNamesWhereItLooked) {
  leave_stale_socket(places_.user);
  std::string socket, error;
  EXPECT_FALSE(choose(socket, error));
  EXPECT_EQ(error, "nobody listens at " + places_.system + " or " + places_.user);
}

TEST_F(ServerChoice, AUserDirectoryOthersCanWriteToIsNotUsed) {
  const Listener user(places_.user);
  ASSERT_EQ(::chmod((dir_.path() + "/user").c_str(), 0777), 0);
  std::string socket, error;
  EXPECT_FALSE(choose(socket, error));
  EXPECT_EQ(error, "will not use " + places_.user + ": " + dir_.path() + "/user is not a " +
                       "directory of uid " + std::to_string(::getuid()) +
                       " that only it can write to");
}

TEST(PrivateDirectory, OwnedAndWritableByTheUserAlone) {
  const gpulimit::testing::TemporaryDirectory dir;
  std::string reason;
  EXPECT_TRUE(is_private_directory(dir.path(), ::getuid(), reason)) << reason;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  EXPECT_TRUE(is_private_directory(dir.path(), ::getuid(), reason)) << reason;

  EXPECT_FALSE(is_private_directory(dir.path(), ::getuid() + 1, reason));
  ASSERT_EQ(::chmod(dir.path().c_str(), 0770), 0);
  EXPECT_FALSE(is_private_directory(dir.path(), ::getuid(), reason));
  ASSERT_EQ(::chmod(dir.path().c_str(), 0700), 0);

  ASSERT_EQ(::symlink(dir.path().c_str(), (dir.path() + "/link").c_str()), 0);
  EXPECT_FALSE(is_private_directory(dir.path() + "/link", ::getuid(), reason));
  EXPECT_FALSE(is_private_directory(dir.path() + "/none", ::getuid(), reason));
  EXPECT_EQ(reason, dir.path() + "/none: No such file or directory");
}

TEST(ServerPlaces, TheCallersTheSystemsAndTheUsersOwn) {
  char runtime[] = "XDG_RUNTIME_DIR=/run/user/1000";
  char* envp[] = {runtime, nullptr};
  const ServerPlaces sut = server_places(envp, "/given.sock", 1000);
  EXPECT_EQ(sut.caller, "/given.sock");
  EXPECT_EQ(sut.system, "/run/gpulimit/gpulimitd.sock");
  EXPECT_EQ(sut.user, "/run/user/1000/gpulimit/gpulimitd.sock");
  EXPECT_EQ(sut.uid, 1000u);
  EXPECT_EQ(server_places(nullptr, "", 42).user, "/tmp/gpulimit-42/gpulimitd.sock");
}

TEST(DirectoryOf, TheDirectoryASocketLiesIn) {
  EXPECT_EQ(directory_of("/a/b/gpulimitd.sock"), "/a/b");
  EXPECT_EQ(directory_of("/gpulimitd.sock"), "/");
  EXPECT_EQ(directory_of("gpulimitd.sock"), ".");
}

TEST(ServerEnvironment, TheCallersLessThePreloadTheDeviceMaskAndTheLimits) {
  std::vector<std::string> text = {"PATH=/bin",
                                   "LD_PRELOAD=/lib/libgpulimit.so",
                                   "CUDA_VISIBLE_DEVICES=1",
                                   "GPULIMIT_MEM=1G",
                                   "GPULIMIT_SM=30",
                                   "GPULIMIT_SOCKET=/s",
                                   "XDG_RUNTIME_DIR=/run/user/1",
                                   "GPULIMIT_SERVER=/bin/gpulimitd",
                                   "LD_LIBRARY_PATH=/x",
                                   "CUDA_DEVICE_SM_LIMIT=50"};
  std::vector<char*> envp;
  for (std::string& entry : text)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  EXPECT_EQ(server_environment(envp.data()),
            (std::vector<std::string>{"PATH=/bin", "XDG_RUNTIME_DIR=/run/user/1",
                                      "GPULIMIT_SERVER=/bin/gpulimitd", "LD_LIBRARY_PATH=/x",
                                      "CUDA_DEVICE_SM_LIMIT=50"}));
  EXPECT_EQ(server_environment(nullptr), std::vector<std::string>{});
}

}  // namespace
}  // namespace gpulimit::cli
