#include "gpulimit/testing/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utmp.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gpulimit/testing/pipe_io.h"

extern char** environ;

namespace gpulimit::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings)
    pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

void close_if_open(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The descriptors the child's stdin, stdout and stderr become, opened (close
// on exec) before the fork, and the test's ends of the pipes.
struct Plumbing {
  int child[3] = {-1, -1, -1};
  int parent[3] = {-1, -1, -1};
  std::string problem;

  ~Plumbing() {
    for (int& fd : child)
      close_if_open(fd);
  }
};

bool open_stream(const Stream& stream, int which, Plumbing& plumbing) {
  int& child = plumbing.child[which];
  switch (stream.kind) {
    case Stream::Kind::kInherit:
      child = ::fcntl(which, F_DUPFD_CLOEXEC, 3);
      return true;
    case Stream::Kind::kNull:
      child = ::open("/dev/null", (which == STDIN_FILENO ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
      break;
    case Stream::Kind::kFile:
      child = ::open(stream.path.c_str(),
                     O_WRONLY | O_CREAT | O_CLOEXEC | (stream.append ? O_APPEND : O_TRUNC), 0644);
      break;
    case Stream::Kind::kPipe: {
      int ends[2];
      if (::pipe2(ends, O_CLOEXEC) != 0) break;
      const bool child_reads = which == STDIN_FILENO;
      child = ends[child_reads ? 0 : 1];
      plumbing.parent[which] = ends[child_reads ? 1 : 0];
      // A write to a helper that died must fail, not kill the test.
      if (child_reads) ::signal(SIGPIPE, SIG_IGN);
      break;
    }
    case Stream::Kind::kStdout:
      child = ::fcntl(plumbing.child[STDOUT_FILENO], F_DUPFD_CLOEXEC, 3);
      break;
  }
  if (child < 0) {
    plumbing.problem =
        (stream.path.empty() ? std::string("stream ") + std::to_string(which) : stream.path) +
        ": " + std::strerror(errno);
    return false;
  }
  return true;
}

// What `fd` has until its end.
std::string read_to_end(int fd) {
  std::string text;
  char chunk[4096];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    text.append(chunk, static_cast<size_t>(got));
  }
  return text;
}

// In a forked child: closes every descriptor but stdio and `keep_a`,
// `keep_b`.
void close_inherited(int keep_a, int keep_b) {
  std::vector<int> open;
  if (DIR* fds = opendir("/proc/self/fd")) {
    while (const dirent* entry = readdir(fds))
      if (entry->d_name[0] != '.') open.push_back(std::atoi(entry->d_name));
    closedir(fds);
  }
  for (const int fd : open)
    if (fd > STDERR_FILENO && fd != keep_a && fd != keep_b) ::close(fd);
}

}  // namespace

Variables with(Variables base, const std::string& name, const std::string& value) {
  for (auto& [key, old] : base)
    if (key == name) {
      old = value;
      return base;
    }
  base.emplace_back(name, value);
  return base;
}

std::vector<std::string> this_environment(const Variables& overrides,
                                          const std::vector<std::string>& dropped_prefixes) {
  std::vector<std::string> result;
  for (char** entry = environ; *entry; ++entry) {
    const std::string_view variable(*entry);
    const std::string_view name = variable.substr(0, variable.find('='));
    bool keep = true;
    for (const auto& [key, value] : overrides)
      keep = keep && key != name;
    for (const std::string& prefix : dropped_prefixes)
      keep = keep && !variable.starts_with(prefix);
    if (keep) result.emplace_back(variable);
  }
  for (const auto& [key, value] : overrides)
    result.push_back(key + "=" + value);
  return result;
}

bool ExitStatus::exited() const {
  return WIFEXITED(wait_status);
}
int ExitStatus::code() const {
  return WEXITSTATUS(wait_status);
}
bool ExitStatus::signaled() const {
  return WIFSIGNALED(wait_status);
}
int ExitStatus::signal() const {
  return WTERMSIG(wait_status);
}
int ExitStatus::shell() const {
  return exited() ? code() : 128 + signal();
}

Process::Process(const Launch& launch) {
  if (launch.argv.empty()) {
    ADD_FAILURE() << "nothing to start";
    return;
  }
  // Everything the child needs is built before the fork: the child of a
  // threaded process may only make async-signal-safe calls until it execs.
  std::vector<std::string> argv_text = launch.argv;
  std::vector<std::string> envp_text = launch.environment.value_or(std::vector<std::string>{});
  const std::vector<char*> argv = pointers_to(argv_text);
  const std::vector<char*> envp = pointers_to(envp_text);
  char* const* const child_environment = launch.environment ? envp.data() : environ;

  Plumbing plumbing;
  int terminal = -1;  // the child's side of its terminal
  int master = -1;
  if (launch.terminal) {
    winsize window{};
    window.ws_col = launch.terminal->columns;
    window.ws_row = launch.terminal->rows;
    if (::openpty(&master, &terminal, nullptr, nullptr, &window) != 0) {
      ADD_FAILURE() << "openpty: " << std::strerror(errno);
      return;
    }
    ::fcntl(master, F_SETFD, FD_CLOEXEC);
    ::fcntl(terminal, F_SETFD, FD_CLOEXEC);
    ::tcgetattr(terminal, &terminal_at_start_);
  } else if (!open_stream(launch.in, STDIN_FILENO, plumbing) ||
             !open_stream(launch.out, STDOUT_FILENO, plumbing) ||
             !open_stream(launch.err, STDERR_FILENO, plumbing)) {
    ADD_FAILURE() << "cannot start " << launch.argv[0] << ": " << plumbing.problem;
    for (int& fd : plumbing.parent)
      close_if_open(fd);
    return;
  }
  // The child writes errno here when it cannot exec; the exec closes it.
  int exec_error[2];
  if (::pipe2(exec_error, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return;
  }

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    if (launch.dies_with_test) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    if (terminal >= 0) {
      if (::login_tty(terminal) != 0) ::_exit(127);
    } else {
      for (int which = 0; which < 3; ++which)
        ::dup2(plumbing.child[which], which);
    }
    if (!launch.working_directory.empty() && ::chdir(launch.working_directory.c_str()) != 0) {
      const int error = errno;
      [[maybe_unused]] const ssize_t ignored = ::write(exec_error[1], &error, sizeof error);
      ::_exit(127);
    }
    ::execve(argv[0], argv.data(), child_environment);
    const int error = errno;
    [[maybe_unused]] const ssize_t ignored = ::write(exec_error[1], &error, sizeof error);
    ::_exit(127);
  }
  ::close(exec_error[1]);
  terminal_ = terminal;
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    ::close(exec_error[0]);
    close_if_open(master);
    close_if_open(terminal_);
    for (int& fd : plumbing.parent)
      close_if_open(fd);
    return;
  }
  int error = 0;
  ssize_t got;
  while ((got = ::read(exec_error[0], &error, sizeof error)) < 0 && errno == EINTR) {
  }
  ::close(exec_error[0]);
  pid_ = pid;
  to_child_ = launch.terminal ? master : plumbing.parent[STDIN_FILENO];
  from_child_ = launch.terminal ? master : plumbing.parent[STDOUT_FILENO];
  errors_from_child_ = plumbing.parent[STDERR_FILENO];
  if (got > 0) {
    ADD_FAILURE() << "cannot start " << launch.argv[0] << ": " << std::strerror(error);
    reap_blocking();
    close_all();
    pid_ = -1;
  }
}

Process Process::fork(const std::function<int(int from_test, int to_test)>& body) {
  Process process;
  int input[2];
  int output[2];
  if (::pipe2(input, O_CLOEXEC) < 0) return process;
  if (::pipe2(output, O_CLOEXEC) < 0) {
    ::close(input[0]);
    ::close(input[1]);
    return process;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    close_inherited(input[0], output[1]);
    ::_exit(body(input[0], output[1]));
  }
  ::close(input[0]);
  ::close(output[1]);
  if (pid < 0) {
    ::close(input[1]);
    ::close(output[0]);
    return process;
  }
  process.pid_ = pid;
  process.to_child_ = input[1];
  process.from_child_ = output[0];
  // A write to a helper that died must fail, not kill the test.
  ::signal(SIGPIPE, SIG_IGN);
  return process;
}

Process::Process(Process&& other) noexcept {
  *this = std::move(other);
}

Process& Process::operator=(Process&& other) noexcept {
  if (this == &other) return *this;
  if (started() && !reaped()) kill_now();
  close_all();
  pid_ = std::exchange(other.pid_, -1);
  status_ = std::exchange(other.status_, std::nullopt);
  to_child_ = std::exchange(other.to_child_, -1);
  from_child_ = std::exchange(other.from_child_, -1);
  errors_from_child_ = std::exchange(other.errors_from_child_, -1);
  terminal_ = std::exchange(other.terminal_, -1);
  terminal_at_start_ = other.terminal_at_start_;
  buffered_ = std::move(other.buffered_);
  return *this;
}

Process::~Process() {
  if (started() && !reaped()) kill_now();
  close_all();
}

void Process::close_all() {
  if (to_child_ == from_child_) to_child_ = -1;  // one terminal, closed once
  close_if_open(to_child_);
  close_if_open(from_child_);
  close_if_open(errors_from_child_);
  close_if_open(terminal_);
}

void Process::reap_blocking() {
  int status = 0;
  pid_t done;
  while ((done = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  if (done != pid_) ADD_FAILURE() << "waitpid(" << pid_ << "): " << std::strerror(errno);
  status_ = ExitStatus{done == pid_ ? status : -1};
}

bool Process::say(std::string_view line) {
  return write_all(to_child_, std::string(line) + "\n");
}

void Process::close_stdin() {
  if (to_child_ == from_child_) return;  // a terminal: it stays
  close_if_open(to_child_);
}

std::optional<std::string> Process::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (const size_t end = buffered_.find('\n'); end != std::string::npos) {
      std::string line = buffered_.substr(0, end);
      buffered_.erase(0, end + 1);
      return line;
    }
    if (!read_more(from_child_, buffered_, deadline)) return std::nullopt;
  }
}

std::string Process::expect(std::string_view prefix, std::chrono::milliseconds timeout) {
  return next_line(from_child_, buffered_, prefix, timeout);
}

std::string Process::read_stdout_to_end() {
  return std::exchange(buffered_, {}) + read_to_end(from_child_);
}

std::string Process::read_stderr_to_end() {
  return read_to_end(errors_from_child_);
}

void Process::signal(int signal) {
  if (started() && !reaped()) ::kill(pid_, signal);
}

std::optional<ExitStatus> Process::wait_for_exit(std::chrono::milliseconds timeout) {
  if (!started()) return std::nullopt;
  if (reaped()) return status_;
  const auto deadline = Clock::now() + timeout;
  // A pidfd becomes readable when the process ends: the wait sleeps until
  // then, not in steps (where pidfds are missing, it polls every ms).
  int pidfd = -1;
  bool pidfd_tried = false;
  std::optional<ExitStatus> ended;
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      ended = status_ = ExitStatus{status};
      break;
    }
    if (done < 0 && errno != EINTR) break;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    if (!pidfd_tried) {
      pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
      pidfd_tried = true;
    }
    if (pidfd >= 0) {
      pollfd ended_fd{pidfd, POLLIN, 0};
      ::poll(&ended_fd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return ended;
}

ExitStatus Process::wait() {
  if (!started()) return {};
  if (!reaped()) reap_blocking();
  return *status_;
}

ExitStatus Process::kill_now() {
  if (!started()) return {};
  if (!reaped()) {
    ::kill(pid_, SIGKILL);
    reap_blocking();
  }
  return *status_;
}

bool Process::wait_until_stopped(std::chrono::milliseconds timeout) {
  if (!started() || reaped()) return false;
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int status = 0;
    const pid_t changed = ::waitpid(pid_, &status, WUNTRACED | WNOHANG);
    if (changed == pid_ && WIFSTOPPED(status)) return true;
    if (changed == pid_) {
      status_ = ExitStatus{status};
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace gpulimit::testing
