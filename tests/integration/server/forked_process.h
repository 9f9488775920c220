// A test's helper process: a fork of the test running `body`, which talks
// with the test line by line through two pipes, so that the test drives it
// step by step and kills it at the moment it chooses.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "gpulimit/testing/process.h"

namespace server_test {

inline constexpr std::chrono::milliseconds kLineTimeout{10'000};

// The child's end.
class ParentLine {
 public:
  ParentLine(int in, int out) : in_(in), out_(out) {}
  void say(std::string_view line);
  // The next line from the test; "" when it closed its end or after the timeout.
  std::string hear(std::chrono::milliseconds timeout = kLineTimeout);

 private:
  int in_;
  int out_;
  std::string buffered_;
};

class ForkedProcess {
 public:
  // `body`'s return value is the child's exit status. The child never
  // returns into the test: it _exit()s, and dies with the test.
  explicit ForkedProcess(const std::function<int(ParentLine&)>& body);
  ForkedProcess(const ForkedProcess&) = delete;
  ForkedProcess& operator=(const ForkedProcess&) = delete;

  pid_t pid() const { return process_.pid(); }
  void say(std::string_view line);
  // Reads lines until one starts with `prefix`; "" at end of output or timeout.
  std::string expect(std::string_view prefix, std::chrono::milliseconds timeout = kLineTimeout);
  // SIGKILL, and waits until the kernel has reaped it.
  void kill_now();
  // Its exit status, or -1 after the timeout.
  int wait_for_exit(std::chrono::milliseconds timeout = kLineTimeout);

 private:
  gpulimit::testing::Process process_;  // killed with the ForkedProcess
};

}  // namespace server_test
