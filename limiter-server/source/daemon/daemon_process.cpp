#include "gpulimit/server/daemon/daemon_process.h"

#include <fcntl.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpulimit::server {
namespace {

constexpr std::size_t kLogFileBytes = 4 * 1024 * 1024;
constexpr std::size_t kLogFilesKept = 2;
constexpr char kReadyWord[] = "ready";

// The parent side of detach(): never returns.
[[noreturn]] void wait_for_child(int fd) {
  std::string word;
  char chunk[512];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    word.append(chunk, static_cast<std::size_t>(got));
  }
  if (word == kReadyWord) _exit(0);
  if (word.empty()) word = "gpulimitd: the server ended before it was serving";
  std::fprintf(stderr, "%s\n", word.c_str());
  _exit(1);
}

}  // namespace

Result<void> set_up_logging(const std::string& file, const std::string& level) {
  try {
    std::shared_ptr<spdlog::logger> logger;
    if (file.empty()) {
      logger = spdlog::stderr_color_mt("gpulimitd");
    } else {
      logger = spdlog::rotating_logger_mt("gpulimitd", file, kLogFileBytes, kLogFilesKept);
    }
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ gpulimitd[%P]: %v");
    logger->set_level(spdlog::level::from_str(level));
    logger->flush_on(spdlog::level::info);
    spdlog::set_default_logger(logger);
    return {};
  } catch (const spdlog::spdlog_ex& error) {
    return fail(std::string("cannot log to ") + (file.empty() ? "stderr" : file) + ": " +
                error.what());
  }
}

Result<std::unique_ptr<BackgroundStart>> BackgroundStart::detach() {
  int word[2];
  if (pipe2(word, O_CLOEXEC) != 0) return fail(std::string("pipe: ") + std::strerror(errno));
  const pid_t child = fork();
  if (child < 0) return fail(std::string("fork: ") + std::strerror(errno));
  if (child > 0) {
    ::close(word[1]);
    wait_for_child(word[0]);
  }
  ::close(word[0]);
  setsid();
  if (chdir("/") != 0) {
    // / always exists; nothing to do if it does not.
  }
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    ::close(null);
  }
  return std::unique_ptr<BackgroundStart>(new BackgroundStart(word[1]));
}

BackgroundStart::~BackgroundStart() {
  if (fd_ >= 0) ::close(fd_);
}

void BackgroundStart::ready() {
  [[maybe_unused]] const ssize_t written = ::write(fd_, kReadyWord, sizeof kReadyWord - 1);
  ::close(fd_);
  fd_ = -1;
  // From now on nobody reads stderr: send it where stdout went.
  dup2(STDOUT_FILENO, STDERR_FILENO);
}

void BackgroundStart::failed(const std::string& message) {
  [[maybe_unused]] const ssize_t written = ::write(fd_, message.data(), message.size());
  ::close(fd_);
  fd_ = -1;
}

}  // namespace gpulimit::server
