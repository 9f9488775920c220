// The server's socket file: its directory made safe, one server per socket
// (a lock file beside it), a stale socket of a dead server removed, a live
// one respected.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "gpulimit/server/daemon/server_config.h"
#include "gpulimit/server/result.h"

namespace gpulimit::server {

class ListeningSocket {
 public:
  // Binds and listens on `path` (SOCK_SEQPACKET, non-blocking). The
  // directory is created if absent: 0700 in user mode, 0755 in system mode,
  // where the socket itself is 0666 (the kernel's peer credentials, not file
  // modes, decide who gets what). A directory the server owns by default
  // (`own_directory`: not one given with --socket) must be this user's and
  // writable by nobody else. Fails with one line when another server holds
  // the socket, or the directory is not safe to use.
  static Result<std::unique_ptr<ListeningSocket>> open(const std::string& path, ServerMode mode,
                                                       bool own_directory);
  // Closes, and removes the socket file if it is still this server's.
  ~ListeningSocket();
  ListeningSocket(const ListeningSocket&) = delete;
  ListeningSocket& operator=(const ListeningSocket&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  ListeningSocket(std::string path, int fd, int lock_fd, dev_t device, ino_t inode)
      : path_(std::move(path)), fd_(fd), lock_fd_(lock_fd), device_(device), inode_(inode) {}

  std::string path_;
  int fd_;
  int lock_fd_;
  dev_t device_;
  ino_t inode_;
};

}  // namespace gpulimit::server
