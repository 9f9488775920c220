// What the gpulimitd process does around the server: logging, detaching
// from its caller once it serves, the descriptor limit.
#pragma once

#include <memory>
#include <string>

#include "gpulimit/server/result.h"

namespace gpulimit::server {

// Logs to stderr (`file` empty) or to `file`, rotated, at `level`.
Result<void> set_up_logging(const std::string& file, const std::string& level);

// The child of a detach: tells the waiting parent how starting went.
class BackgroundStart {
 public:
  // Forks. The parent waits for the child's word and exits with it: 0 once
  // the child serves, or 1 after printing the child's one-line failure. Only
  // the child returns: in a new session, in /, stdin and stdout on /dev/null.
  static Result<std::unique_ptr<BackgroundStart>> detach();
  ~BackgroundStart();
  BackgroundStart(const BackgroundStart&) = delete;
  BackgroundStart& operator=(const BackgroundStart&) = delete;

  void ready();
  void failed(const std::string& message);

 private:
  explicit BackgroundStart(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace gpulimit::server
