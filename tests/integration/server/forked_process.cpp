#include "forked_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gpulimit/testing/child_process.h"
#include "gpulimit/testing/pipe_io.h"

namespace server_test {
namespace {

using Clock = std::chrono::steady_clock;

using gpulimit::testing::next_line;
using gpulimit::testing::write_all;

// In the child: closes every descriptor but stdio and `keep_a`, `keep_b`, so
// that the child holds no copy of the test's connections (the server must
// see them close when the test closes them).
void close_inherited(int keep_a, int keep_b) {
  std::vector<int> open;
  if (DIR* fds = opendir("/proc/self/fd")) {
    while (const dirent* entry = readdir(fds))
      if (entry->d_name[0] != '.') open.push_back(std::atoi(entry->d_name));
    closedir(fds);
  }
  for (const int fd : open)
    if (fd > STDERR_FILENO && fd != keep_a && fd != keep_b) close(fd);
}

}  // namespace

void ParentLine::say(std::string_view line) {
  write_all(out_, std::string(line) + "\n");
}

std::string ParentLine::hear(std::chrono::milliseconds timeout) {
  return next_line(in_, buffered_, "", timeout);
}

ForkedProcess::ForkedProcess(const std::function<int(ParentLine&)>& body) {
  int input[2];
  int output[2];
  if (pipe2(input, O_CLOEXEC) < 0 || pipe2(output, O_CLOEXEC) < 0) return;
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    close_inherited(input[0], output[1]);
    ParentLine line(input[0], output[1]);
    _exit(body(line));
  }
  close(input[0]);
  close(output[1]);
  to_child_ = input[1];
  from_child_ = output[0];
  signal(SIGPIPE, SIG_IGN);
}

ForkedProcess::~ForkedProcess() {
  kill_now();
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
}

void ForkedProcess::say(std::string_view line) {
  write_all(to_child_, std::string(line) + "\n");
}

std::string ForkedProcess::expect(std::string_view prefix, std::chrono::milliseconds timeout) {
  return next_line(from_child_, buffered_, prefix, timeout);
}

void ForkedProcess::kill_now() {
  if (pid_ <= 0 || reaped_) return;
  gpulimit::testing::kill_and_reap(pid_);
  reaped_ = true;
}

int ForkedProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0 || reaped_) return -1;
  const int status = gpulimit::testing::reap_by(pid_, Clock::now() + timeout);
  if (status >= 0) reaped_ = true;
  return status;
}

}  // namespace server_test
