// A program the test talks to line by line (the gate probe), or just runs
// (a workload): started with an environment of the test's choosing, its
// stdin and stdout on pipes, its stderr in a file.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpulimit/testing/process.h"

namespace gate_test {

// Variables set in the child on top of this process's environment, from
// which every GPULIMIT_*, FAKECUDA_* and LD_PRELOAD variable is removed.
using Environment = gpulimit::testing::Variables;

class ProbeProcess {
 public:
  ProbeProcess(const std::vector<std::string>& argv, const Environment& environment,
               std::string stderr_path);
  ProbeProcess(const ProbeProcess&) = delete;
  ProbeProcess& operator=(const ProbeProcess&) = delete;
  // Closes stdin, then kills the process if it has not ended within a second.
  ~ProbeProcess();

  pid_t pid() const { return process_.pid(); }

  void send(const std::string& line);
  // The next line of stdout, or nothing when none comes within `timeout`.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // send() then read_line().
  std::optional<std::string> ask(const std::string& line,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(20));

  // Waits for the process to end; its exit status, or -1 after `timeout`.
  int wait(std::chrono::milliseconds timeout);
  std::string stderr_text() const;

 private:
  std::string stderr_path_;
  gpulimit::testing::Process process_;
};

// The words of an answer line.
std::vector<std::string> words(const std::string& line);

}  // namespace gate_test
