#include "sealed_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpulimit::shm {
namespace {

void close_keeping_errno(int fd) {
  const int saved = errno;
  ::close(fd);
  errno = saved;
}

}  // namespace

std::string describe_errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

int create_sealed_memfd(const char* name, const char* what, std::size_t size, void** mapping,
                        std::string& error) {
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    error = describe_errno((std::string("cannot create ") + what + " (memfd_create)").c_str());
    return -1;
  }
  if (ftruncate(fd, static_cast<off_t>(size)) < 0) {
    error = describe_errno((std::string("cannot size ") + what).c_str());
    close_keeping_errno(fd);
    return -1;
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
    error = describe_errno((std::string("cannot seal the size of ") + what).c_str());
    close_keeping_errno(fd);
    return -1;
  }
  void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mapped == MAP_FAILED) {
    error = describe_errno((std::string("cannot map ") + what).c_str());
    close_keeping_errno(fd);
    return -1;
  }
  *mapping = mapped;
  return fd;
}

bool make_read_only(int fd, const char* what, std::string& error) {
  if (fchmod(fd, 0400) == 0) return true;
  error =
      describe_errno((std::string("cannot make ") + what + " read-only for its clients").c_str());
  return false;
}

int reopen_read_only(int fd) noexcept {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  int reopened;
  do {
    reopened = ::open(path, O_RDONLY | O_CLOEXEC);
  } while (reopened < 0 && errno == EINTR);
  return reopened;
}

}  // namespace gpulimit::shm
