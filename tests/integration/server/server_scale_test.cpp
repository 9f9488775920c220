// Many processes attaching at once, as a job's DataLoader workers or a
// torchrun launch do: all must be welcomed, fast, with none serialised
// behind another. The time measured is printed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpulimit/testing/temporary_directory.h"
#include "server_process.h"
#include "test_client.h"

namespace server_test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kProcesses = 300;
// The goal: 300 processes attached within a second.
constexpr std::chrono::milliseconds kAllWelcomedWithin{1'000};

TEST(ServerScale, ThreeHundredProcessesAttachingAtOnceAreAllWelcomedWithinASecond) {
  gpulimit::testing::TemporaryDirectory dir;
  ServerProcess server(dir.path(), {"--log-level", "info"});
  ASSERT_TRUE(server.wait_until_serving()) << server.log();
  int go[2];
  int done[2];
  ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(done, O_CLOEXEC), 0);
  std::vector<pid_t> children;

  // Every process is started and waiting before the clock starts: what is
  // measured is the attaching, not fork().
  for (int i = 0; i < kProcesses; ++i) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      close(go[1]);
      char byte;
      while (read(go[0], &byte, 1) < 0 && errno == EINTR) {
      }
      TestClient client(server.socket());
      HelloOptions options;
      options.tenant = "job-" + std::to_string(i % 30);  // 30 tenants of 10 processes
      const char answer = client.hello(options) ? 'w' : 'r';
      [[maybe_unused]] const ssize_t written = write(done[1], &answer, 1);
      pause();  // stays attached until killed
      _exit(0);
    }
    children.push_back(child);
  }
  close(done[1]);

  const auto start = Clock::now();
  close(go[1]);  // every child's read returns at once
  int welcomed = 0;
  int answered = 0;
  while (answered < kProcesses && Clock::now() - start < std::chrono::seconds(30)) {
    pollfd ready{done[0], POLLIN, 0};
    if (poll(&ready, 1, 1000) <= 0) continue;
    char answers[kProcesses];
    const ssize_t got = read(done[0], answers, sizeof answers);
    for (ssize_t i = 0; i < got; ++i) {
      ++answered;
      welcomed += answers[i] == 'w';
    }
  }
  const auto took = std::chrono::duration<double, std::milli>(Clock::now() - start);

  std::printf("%d processes attached (Hello to Welcome, all at once) in %.1f ms\n", welcomed,
              took.count());
  RecordProperty("attach_300_ms", std::to_string(took.count()));
  EXPECT_EQ(welcomed, kProcesses) << server.log();
  EXPECT_LT(took, kAllWelcomedWithin);
  const auto status = TestClient(server.socket()).status();
  ASSERT_TRUE(status);
  EXPECT_EQ((*status)["tenants"].size(), 30u);

  for (const pid_t child : children)
    kill(child, SIGKILL);
  for (const pid_t child : children)
    waitpid(child, nullptr, 0);
  close(go[0]);
  close(done[0]);
}

}  // namespace
}  // namespace server_test
