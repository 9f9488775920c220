// Runs a workload binary as a child process, with the environment a test
// chooses, and reads its key=value report.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpulimit/testing/process.h"
#include "gpulimit/testing/temporary_directory.h"

namespace integration {

// Variables to set in the child, on top of this process's environment.
using Environment = gpulimit::testing::Variables;
using gpulimit::testing::with;

// A report line as the workloads print it (tests/workloads/README.md).
class Report {
 public:
  static Report parse(std::string_view line);

  bool has(std::string_view key) const;
  // The value of `key`; a test failure and "" when it is missing.
  std::string text(std::string_view key) const;
  // The value of `key` as an unsigned number; a test failure and 0 when it is
  // missing or not a number.
  uint64_t number(std::string_view key) const;
  // A comma-separated list of numbers.
  std::vector<uint64_t> numbers(std::string_view key) const;

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

struct WorkloadRun {
  int exit_status = -1;  // the exit code, or 128 + the signal that ended it
  bool timed_out = false;
  std::string out;
  std::string err;
  Report report;  // the last line of `out`

  // Everything a failed assertion should show.
  std::string describe() const;
};

using gpulimit::testing::TemporaryDirectory;

// A started workload. Its output goes to files, so that a test can look at
// it while the workload runs.
class WorkloadProcess {
 public:
  WorkloadProcess(const std::string& program, const std::vector<std::string>& args,
                  const Environment& environment);
  WorkloadProcess(const WorkloadProcess&) = delete;
  WorkloadProcess& operator=(const WorkloadProcess&) = delete;
  // Going, it kills the process if it still runs (process_ goes before
  // output_, which takes the output files with it).

  bool started() const { return process_.started(); }
  pid_t pid() const { return process_.pid(); }
  // Waits until stdout contains `text`; false if the process ended or the
  // time ran out first.
  bool wait_for_output(std::string_view text, std::chrono::milliseconds timeout);
  void kill_now();
  // Waits for the process to end, killing it after `timeout`.
  WorkloadRun wait(std::chrono::milliseconds timeout);

 private:
  std::string read_stdout() const;

  TemporaryDirectory output_;
  gpulimit::testing::Process process_;
  std::string out_path_;
  std::string err_path_;
};

// Runs a workload to completion (at most `timeout`).
WorkloadRun run_workload(const std::string& program, const std::vector<std::string>& args,
                         const Environment& environment,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60));

// What the file at `path` holds; empty when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace integration
