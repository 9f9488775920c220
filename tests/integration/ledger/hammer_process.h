// A ledger_hammer process started by a test: commands go to its stdin, one
// line each, and its answers are read back line by line, with a timeout.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/testing/process.h"

namespace ledger_test {

// Generous: bounds that only a wedged process could reach.
inline constexpr std::chrono::milliseconds kAnswerTimeout{30'000};

class HammerProcess {
 public:
  HammerProcess(const std::string& dir, const std::string& tenant,
                const std::vector<std::string>& options = {});
  HammerProcess(const HammerProcess&) = delete;
  HammerProcess& operator=(const HammerProcess&) = delete;
  // Going, it kills the process if it still runs.

  pid_t pid() const { return process_.pid(); }

  void send(std::string_view command);
  // Reads answers until one starts with `prefix` and returns it; "" when the
  // process ends, or the timeout passes, first.
  std::string expect(std::string_view prefix, std::chrono::milliseconds timeout = kAnswerTimeout);
  // send() then expect().
  std::string ask(std::string_view command, std::string_view answer_prefix);

  // SIGKILL, then waits until the kernel has reaped it: its locks are gone.
  void kill_now();
  // Waits until the process has stopped itself (SIGSTOP).
  bool wait_until_stopped(std::chrono::milliseconds timeout = kAnswerTimeout);
  void resume();
  // Sends "exit" and waits; the exit status, or -1.
  int exit_now(std::chrono::milliseconds timeout = kAnswerTimeout);

 private:
  gpulimit::testing::Process process_;
};

// The number after `key=` in an answer line; `fallback` when absent.
uint64_t number_in(std::string_view line, std::string_view key, uint64_t fallback = 0);
// The comma-separated numbers after `key=`.
std::vector<uint64_t> numbers_in(std::string_view line, std::string_view key);

}  // namespace ledger_test
