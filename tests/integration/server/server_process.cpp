#include "server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpulimit/testing/child_process.h"
#include "gpulimit/protocol/channel.h"

namespace server_test {
namespace {

using Clock = std::chrono::steady_clock;

pid_t spawn(const std::vector<std::string>& args, int stderr_fd) {
  std::vector<std::string> copies = args;
  std::vector<char*> argv;
  for (auto& arg : copies)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives a crashed test
    if (getppid() != parent) _exit(127);
    const int null = open("/dev/null", O_RDWR);
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    if (stderr_fd >= 0) dup2(stderr_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

ServerProcess::ServerProcess(const std::string& dir, const std::vector<std::string>& options)
    : socket_(dir + "/gpulimitd.sock"), log_path_(dir + "/gpulimitd.log") {
  std::vector<std::string> args = {GPULIMITD_PATH, "--foreground", "--socket",
                                   socket_,        "--log-level",  "debug"};
  args.insert(args.end(), options.begin(), options.end());
  const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  pid_ = spawn(args, log);
  close(log);
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !reaped_) gpulimit::testing::kill_and_reap(pid_);
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
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

int ServerProcess::stop(std::chrono::milliseconds timeout) {
  if (reaped_) return -1;
  kill(pid_, SIGTERM);
  return wait_for_exit(timeout);
}

int ServerProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  if (reaped_) return -1;
  const int status = gpulimit::testing::reap_by(pid_, Clock::now() + timeout);
  if (status >= 0) reaped_ = true;
  return status;
}

std::string ServerProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

pid_t spawn_program(const std::vector<std::string>& args,
                    const std::vector<std::string>& environment, const std::string& output_path) {
  std::vector<std::string> arg_copies = args;
  std::vector<std::string> env_copies = environment;
  std::vector<char*> argv;
  std::vector<char*> envp;
  for (auto& arg : arg_copies)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  for (auto& entry : env_copies)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  const int output = open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int null = open("/dev/null", O_RDONLY);
    dup2(null, STDIN_FILENO);
    dup2(output, STDOUT_FILENO);
    dup2(output, STDERR_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(output);
  return pid;
}

int wait_for_program(pid_t pid, std::chrono::milliseconds timeout) {
  const int status = gpulimit::testing::reap_by(pid, Clock::now() + timeout);
  if (status < 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return status;
}

CommandOutcome run_gpulimitd(const std::vector<std::string>& args,
                             std::chrono::milliseconds timeout) {
  CommandOutcome outcome;
  int err[2];
  if (pipe2(err, O_CLOEXEC) != 0) return outcome;
  std::vector<std::string> full = {GPULIMITD_PATH};
  full.insert(full.end(), args.begin(), args.end());
  const pid_t pid = spawn(full, err[1]);
  close(err[1]);
  // Read stderr to its end: the daemon's parent closes it when it exits,
  // while a detached child keeps nothing of it.
  char chunk[1024];
  for (;;) {
    const ssize_t got = read(err[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    outcome.stderr_text.append(chunk, static_cast<size_t>(got));
  }
  close(err[0]);
  outcome.status = gpulimit::testing::reap_by(pid, Clock::now() + timeout);
  if (outcome.status < 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  return outcome;
}

}  // namespace server_test
