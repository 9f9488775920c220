// A pidfd: a descriptor that pins one process (a later process given the
// same pid is not it), becomes readable when that process exits, and
// signals only it. The event loop learns of exits through it without
// polling, and the watcher kills through it without racing pid reuse.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace gpulimit::server {

// The pidfd of `pid`, or -1 with errno set: the process is gone, or the
// kernel predates pidfds (Linux 5.3).
inline int pidfd_open(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace gpulimit::server
