// Talking with a helper process over pipes, a line at a time: the writes and
// the deadline-bounded reads the process-driving test helpers share.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <string_view>

namespace gpulimit::testing {

// Writes all of `text`, retrying on EINTR; false, quietly, when the reader
// has gone (the test then sees the helper's end).
inline bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    text.remove_prefix(static_cast<size_t>(written));
  }
  return true;
}

// Appends what `fd` has to `buffer`, waiting until `deadline` at most; false
// at end of input (the writer closed its end or ended) or past the deadline.
inline bool read_more(int fd, std::string& buffer, std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
  if (left < 0) return false;
  pollfd ready{fd, POLLIN, 0};
  const int polled = ::poll(&ready, 1, static_cast<int>(left));
  if (polled < 0 && errno == EINTR) return true;
  if (polled <= 0) return false;
  char chunk[4096];
  const ssize_t got = ::read(fd, chunk, sizeof chunk);
  if (got < 0 && errno == EINTR) return true;
  if (got <= 0) return false;
  buffer.append(chunk, static_cast<size_t>(got));
  return true;
}

// The next line from `fd` that starts with `prefix` (lines before it are
// dropped), without its newline; `buffer` keeps what was read past it. ""
// when input ends or `timeout` passes first.
inline std::string next_line(int fd, std::string& buffer, std::string_view prefix,
                             std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, newline);
      buffer.erase(0, newline + 1);
      if (line.starts_with(prefix)) return line;
    }
    if (!read_more(fd, buffer, deadline)) return {};
  }
}

}  // namespace gpulimit::testing
