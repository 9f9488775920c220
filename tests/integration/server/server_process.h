// A gpulimitd started by a test, in the foreground, on a socket in the
// test's own directory, logging to a file there.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/testing/process.h"

namespace server_test {

// Generous: bounds that only a wedged server could reach.
inline constexpr std::chrono::milliseconds kStartTimeout{10'000};

// How a test's gpulimitd runs, beyond its options.
struct ServerLaunch {
  std::vector<std::string> options;
  // Its whole environment (NAME=value each), e.g. a SimulatedMachine's, so
  // that its NVML lists that machine's GPUs; the test's own when unset.
  std::optional<std::vector<std::string>> environment;
  // Its RLIMIT_NOFILE, soft and hard; unchanged when 0.
  uint64_t descriptor_limit = 0;
};

class ServerProcess {
 public:
  // `dir`: the test's directory; the socket is dir/gpulimitd.sock.
  ServerProcess(const std::string& dir, const std::vector<std::string>& options = {});
  ServerProcess(const std::string& dir, const ServerLaunch& launch);
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  // Going, it SIGKILLs the server if it still runs.

  const std::string& socket() const { return socket_; }
  pid_t pid() const { return process_.pid(); }
  // Until the socket accepts connections; false if the server exited first.
  bool wait_until_serving(std::chrono::milliseconds timeout = kStartTimeout);
  // SIGTERM, then the exit status (128 + signal if killed), or -1 after the timeout.
  int stop(std::chrono::milliseconds timeout = kStartTimeout);
  // Its exit status once it exits by itself, or -1 after the timeout.
  int wait_for_exit(std::chrono::milliseconds timeout);
  std::string log() const;

 private:
  std::string socket_;
  std::string log_path_;
  gpulimit::testing::Process process_;
};

// Starts `args` (a program and its arguments) with exactly `environment`
// (NAME=VALUE each), stdout and stderr to `output_path`.
gpulimit::testing::Process spawn_program(const std::vector<std::string>& args,
                                         const std::vector<std::string>& environment,
                                         const std::string& output_path);
// The exit status of `program` (128 + signal if killed), or -1 after the
// timeout (it is then killed).
int wait_for_program(gpulimit::testing::Process& program, std::chrono::milliseconds timeout);

// Runs gpulimitd with `args` to its end; its exit status and stderr.
struct CommandOutcome {
  int status = -1;
  std::string stderr_text;
};
CommandOutcome run_gpulimitd(const std::vector<std::string>& args,
                             std::chrono::milliseconds timeout = kStartTimeout);

}  // namespace server_test
