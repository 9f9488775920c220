#include "liveness_lock.h"

#include <fcntl.h>

#include <cerrno>

namespace gpulimit::shm::liveness {
namespace {

int fcntl_retrying(int fd, int command, struct flock* lock) {
  int result;
  do {
    result = fcntl(fd, command, lock);
  } while (result < 0 && errno == EINTR);
  return result;
}

// l_len 0 reaches to the largest possible offset.
struct flock byte_range(short type, off_t start, off_t length) {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = start;
  lock.l_len = length;
  return lock;
}

bool conflicting_lock(int fd, off_t start, off_t length) {
  struct flock lock = byte_range(F_WRLCK, start, length);
  if (fcntl_retrying(fd, F_OFD_GETLK, &lock) < 0) return true;
  return lock.l_type != F_UNLCK;
}

}  // namespace

bool take(int fd, uint32_t slot) noexcept {
  struct flock lock = byte_range(F_WRLCK, kLivenessLockBase + slot, 1);
  return fcntl_retrying(fd, F_OFD_SETLK, &lock) == 0;
}

void drop(int fd, uint32_t slot) noexcept {
  struct flock lock = byte_range(F_UNLCK, kLivenessLockBase + slot, 1);
  fcntl_retrying(fd, F_OFD_SETLK, &lock);
}

bool held_by_other(int fd, uint32_t slot) noexcept {
  return conflicting_lock(fd, kLivenessLockBase + slot, 1);
}

bool any_held_by_other(int fd) noexcept {
  return conflicting_lock(fd, kLivenessLockBase, 0);
}

}  // namespace gpulimit::shm::liveness
