#include "top_terminal_process.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "gpulimit/testing/process.h"

namespace integration {

TerminalProcess::TerminalProcess(const std::string& program, const std::vector<std::string>& args,
                                 const std::vector<std::string>& environment,
                                 unsigned short columns, unsigned short rows) {
  gpulimit::testing::Launch launch;
  launch.argv = {program};
  launch.argv.insert(launch.argv.end(), args.begin(), args.end());
  launch.environment = environment;
  launch.terminal = gpulimit::testing::Terminal{columns, rows};
  process_ = gpulimit::testing::Process(launch);
  if (!process_.started()) return;
  master_ = process_.stdout_fd();
  fcntl(master_, F_SETFL, fcntl(master_, F_GETFL) | O_NONBLOCK);
}

TerminalProcess::~TerminalProcess() {
  process_.kill_now();
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
  while (process_.started() && !process_.reaped()) {
    read_some(std::chrono::milliseconds(20));
    if (const auto status = process_.wait_for_exit(std::chrono::milliseconds(0))) {
      while (read_some(std::chrono::milliseconds(0))) {
      }
      return status->wait_status;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      process_.kill_now();
      return -1;
    }
  }
  return -1;
}

termios TerminalProcess::settings() const {
  termios now{};
  tcgetattr(process_.terminal_fd(), &now);
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
