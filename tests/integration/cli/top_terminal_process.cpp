#include "top_terminal_process.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace integration {
namespace {

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings)
    pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

TerminalProcess::TerminalProcess(const std::string& program, const std::vector<std::string>& args,
                                 const std::vector<std::string>& environment,
                                 unsigned short columns, unsigned short rows) {
  std::vector<std::string> argv_text = {program};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<std::string> envp_text = environment;
  // Built before the fork: the child of a threaded process only execs.
  const std::vector<char*> argv = pointers_to(argv_text);
  const std::vector<char*> envp = pointers_to(envp_text);

  winsize window{};
  window.ws_col = columns;
  window.ws_row = rows;
  const pid_t pid = forkpty(&master_, nullptr, nullptr, &window);
  if (pid == 0) {
    execve(program.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) return;
  pid_ = pid;
  fcntl(master_, F_SETFL, fcntl(master_, F_GETFL) | O_NONBLOCK);
  // The parent's own handle on the terminal, for its settings after the
  // program is gone.
  if (const char* name = ptsname(master_)) slave_ = open(name, O_RDWR | O_NOCTTY);
  if (slave_ >= 0) tcgetattr(slave_, &initial_);
}

TerminalProcess::~TerminalProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (slave_ >= 0) close(slave_);
  if (master_ >= 0) close(master_);
}

bool TerminalProcess::read_some(std::chrono::milliseconds timeout) {
  pollfd ready{.fd = master_, .events = POLLIN, .revents = 0};
  if (poll(&ready, 1, static_cast<int>(timeout.count())) <= 0) return false;
  char buffer[4096];
  bool got = false;
  for (;;) {
    const ssize_t n = read(master_, buffer, sizeof buffer);
    if (n > 0) {
      output_.append(buffer, static_cast<std::size_t>(n));
      got = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return got;
  }
}

bool TerminalProcess::wait_for_output(std::string_view text, std::chrono::milliseconds timeout,
                                      std::size_t from) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (output_.size() > from && output_.find(text, from) != std::string::npos) return true;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    read_some(std::min(left, std::chrono::milliseconds(100)));
  }
}

bool TerminalProcess::type(std::string_view keys) {
  return write(master_, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size());
}

bool TerminalProcess::resize(unsigned short columns, unsigned short rows) {
  winsize window{};
  window.ws_col = columns;
  window.ws_row = rows;
  return ioctl(master_, TIOCSWINSZ, &window) == 0;
}

int TerminalProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0) {
    read_some(std::chrono::milliseconds(20));
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      while (read_some(std::chrono::milliseconds(0))) {
      }
      return status;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      return -1;
    }
  }
  return -1;
}

termios TerminalProcess::settings() const {
  termios now{};
  tcgetattr(slave_, &now);
  return now;
}

std::vector<std::string> written_pieces(std::string_view bytes) {
  std::vector<std::string> pieces(1);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '\x1b') {
      pieces.back() += bytes[i];
      continue;
    }
    if (i + 1 < bytes.size() && bytes[i + 1] == '[') {
      // CSI: parameters and intermediates up to a final byte in @..~.
      std::size_t end = i + 2;
      while (end < bytes.size() && (bytes[end] < '@' || bytes[end] > '~'))
        ++end;
      if (end < bytes.size() && bytes[end] == 'H') pieces.emplace_back();
      i = end;
    } else {
      ++i;  // a two-byte escape
    }
  }
  return pieces;
}

}  // namespace integration
