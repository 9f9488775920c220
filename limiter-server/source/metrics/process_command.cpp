#include "gpulimit/server/metrics/process_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace gpulimit::server {

std::string command_from_cmdline(const std::string& bytes) {
  std::string command;
  // Arguments end with a NUL each; a trailing one ends the last.
  std::size_t end = bytes.size();
  while (end > 0 && bytes[end - 1] == '\0')
    --end;
  for (std::size_t i = 0; i < end && command.size() < kMaxCommandLength; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\0') {
      command += ' ';
    } else if (c < 0x20 || c == 0x7f) {
      command += '?';
    } else {
      command += static_cast<char>(c);
    }
  }
  return command;
}

std::string process_command(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  // A little more than is kept: enough to tell where the kept part ends.
  char buffer[kMaxCommandLength + 1];
  std::string bytes;
  while (bytes.size() < sizeof buffer) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer - bytes.size());
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    bytes.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(fd);
  return command_from_cmdline(bytes);
}

}  // namespace gpulimit::server
