#include "gate/connection_watcher.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "gate/background_thread.h"
#include "gate/gate_attachment.h"
#include "gate/gate_session.h"

namespace gpulimit::gate {
namespace {

std::atomic<bool> running{false};
// The inotify descriptor while the watcher waits for a server: a forked
// child closes its copy.
std::atomic<int> watch_fd{-1};

// Returns once the server has closed the connection or hung up.
void wait_until_gone(int socket) {
  pollfd connection{socket, POLLIN | POLLRDHUP, 0};
  for (;;) {
    const int ready = poll(&connection, 1, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || (connection.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL))) return;
    if (connection.revents & POLLIN) {
      // The server sends nothing after Welcome; whatever comes is dropped
      // (a packet whole, with any descriptor it carried).
      char packet[256];
      const ssize_t got = recv(socket, packet, sizeof packet, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return;
    }
  }
}

void nap(long milliseconds) {
  timespec pause{0, milliseconds * 1'000'000};
  while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
}

// A server that has just bound its socket may not listen yet: a few quick
// tries before waiting for the next sign of it.
Reattach attach_with_retries(int tries) {
  Reattach outcome = attach_again();
  for (int i = 1; i < tries && outcome == Reattach::kUnreachable; ++i) {
    nap(10L << i);
    outcome = attach_again();
  }
  return outcome;
}

// Blocks until an event names `name` in the watched directory, or for at
// most `timeout_ms` (-1: no limit). False when the directory itself went or
// the descriptor fails.
bool wait_for_name(int fd, const std::string& name, int timeout_ms) {
  alignas(inotify_event) char events[4096];
  for (;;) {
    pollfd watch{fd, POLLIN, 0};
    const int ready = poll(&watch, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return false;
    if (ready == 0) return true;
    const ssize_t got = read(fd, events, sizeof events);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    bool named = false;
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= got;) {
      const auto* event = reinterpret_cast<const inotify_event*>(events + at);
      if (event->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) return false;
      if (event->len > 0 && name == event->name) named = true;
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
    if (named) return true;
  }
}

// Ungated: waits for a server at the socket's path and attaches to it. True
// once attached.
bool wait_for_server() {
  const std::string& directory = server_socket_directory();
  const std::string& name = server_socket_name();
  const int fd = inotify_init1(IN_CLOEXEC);
  if (fd < 0) return false;
  watch_fd.store(fd, std::memory_order_release);
  bool attached = false;
  if (inotify_add_watch(fd, directory.c_str(), IN_CREATE | IN_MOVED_TO | IN_ATTRIB) >= 0) {
    // The server may have come back before the watch was in place.
    int backoff_ms = 0;
    for (int tries = 1;; tries = 6) {
      const Reattach outcome = attach_with_retries(tries);
      if (outcome == Reattach::kAttached || outcome == Reattach::kRefused) {
        attached = outcome == Reattach::kAttached;
        break;
      }
      // Nobody listens: a new server makes a new socket, which the watch
      // sees. A server that listens but does not answer makes no event: try
      // it again, less and less often.
      backoff_ms = outcome == Reattach::kNoAnswer ? std::clamp(backoff_ms * 2, 1000, 30000) : 0;
      if (!wait_for_name(fd, name, backoff_ms > 0 ? backoff_ms : -1)) break;
    }
  }
  if (watch_fd.exchange(-1, std::memory_order_acq_rel) == fd) close(fd);
  return attached;
}

void* watch(void*) {
  for (;;) {
    if (GateSession* session = current_session()) {
      wait_until_gone(session->connection().socket());
      server_gone(*session);
      continue;
    }
    if (!wait_for_server()) break;
  }
  running.store(false, std::memory_order_release);
  return nullptr;
}

}  // namespace

bool ensure_connection_watcher() noexcept {
  if (running.exchange(true, std::memory_order_acq_rel)) return true;
  if (start_background_thread(watch, nullptr, "gpulimit-watch")) return true;
  running.store(false, std::memory_order_release);
  return false;
}

void forget_connection_watcher_after_fork() noexcept {
  const int fd = watch_fd.exchange(-1, std::memory_order_relaxed);
  if (fd >= 0) close(fd);
  running.store(false, std::memory_order_relaxed);
}

}  // namespace gpulimit::gate
