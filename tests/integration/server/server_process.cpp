#include "server_process.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "gpulimit/protocol/channel.h"

namespace server_test {
namespace {

using Clock = std::chrono::steady_clock;
using gpulimit::testing::Launch;
using gpulimit::testing::Process;
using gpulimit::testing::Stream;

}  // namespace

ServerProcess::ServerProcess(const std::string& dir, const std::vector<std::string>& options)
    : ServerProcess(dir, ServerLaunch{options, std::nullopt, 0}) {}

ServerProcess::ServerProcess(const std::string& dir, const ServerLaunch& how)
    : socket_(dir + "/gpulimitd.sock"), log_path_(dir + "/gpulimitd.log") {
  Launch launch;
  if (how.descriptor_limit > 0)  // the shell's ulimit sets both limits; exec keeps the pid
    launch.argv = {"/bin/sh", "-c",
                   "ulimit -n " + std::to_string(how.descriptor_limit) + " && exec \"$0\" \"$@\""};
  launch.argv.insert(launch.argv.end(),
                     {GPULIMITD_PATH, "--foreground", "--socket", socket_, "--log-level", "debug"});
  launch.argv.insert(launch.argv.end(), how.options.begin(), how.options.end());
  launch.environment = how.environment;
  launch.err = Stream::file(log_path_, /*append=*/true);
  launch.dies_with_test = true;  // never outlives a crashed test
  process_ = Process(launch);
}

bool ServerProcess::wait_until_serving(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::string error;
    const int fd = gpulimit::protocol::connect_to(socket_, error);
    if (fd >= 0) {
      close(fd);
      return true;
    }
    if (process_.wait_for_exit(std::chrono::milliseconds(0))) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

int ServerProcess::stop(std::chrono::milliseconds timeout) {
  if (process_.reaped()) return -1;
  process_.signal(SIGTERM);
  return wait_for_exit(timeout);
}

int ServerProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  if (process_.reaped()) return -1;
  const auto status = process_.wait_for_exit(timeout);
  return status ? status->shell() : -1;
}

std::string ServerProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Process spawn_program(const std::vector<std::string>& args,
                      const std::vector<std::string>& environment, const std::string& output_path) {
  Launch launch;
  launch.argv = args;
  launch.environment = environment;
  launch.out = Stream::file(output_path);
  launch.err = Stream::as_stdout();
  launch.dies_with_test = true;
  return Process(launch);
}

int wait_for_program(Process& program, std::chrono::milliseconds timeout) {
  if (const auto status = program.wait_for_exit(timeout)) return status->shell();
  program.kill_now();
  return -1;
}

CommandOutcome run_gpulimitd(const std::vector<std::string>& args,
                             std::chrono::milliseconds timeout) {
  CommandOutcome outcome;
  Launch launch;
  launch.argv = {GPULIMITD_PATH};
  launch.argv.insert(launch.argv.end(), args.begin(), args.end());
  launch.err = Stream::pipe();
  launch.dies_with_test = true;
  Process daemon(launch);
  if (!daemon.started()) return outcome;
  // Read stderr to its end: the daemon's parent closes it when it exits,
  // while a detached child keeps nothing of it.
  outcome.stderr_text = daemon.read_stderr_to_end();
  outcome.status = wait_for_program(daemon, timeout);
  return outcome;
}

}  // namespace server_test
