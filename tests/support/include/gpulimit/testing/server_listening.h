// Waiting for a gpulimitd the test started to listen on its socket: a
// condition polled, never a guess at how long starting takes.
#pragma once

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "gpulimit/protocol/channel.h"

namespace gpulimit::testing {

// True once a connection to `socket` succeeds; false, with the last
// connect error in `error`, after `patience`.
inline bool wait_until_listening(const std::string& socket, std::chrono::milliseconds patience,
                                 std::string& error) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    const int fd = protocol::connect_to(socket, error);
    if (fd >= 0) {
      ::close(fd);
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace gpulimit::testing
