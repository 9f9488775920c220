// Ending and reaping the helper processes tests start: the waits and the
// SIGKILL the process-driving test helpers share.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace gpulimit::testing {

// A wait status as a shell reports it: the exit code, or 128 + the signal.
inline int shell_status(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The shell status of child `pid` once it has ended, reaping it; -1 when it
// has not ended by `deadline` (it is then left running) or is no child.
inline int reap_by(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    int status;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return shell_status(status);
    if (done < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// SIGKILLs child `pid` and reaps it.
inline void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace gpulimit::testing
