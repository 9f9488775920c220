#include "ledger_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "liveness_lock.h"

namespace gpulimit::shm {
namespace {

// A sweeper that removes the file between our open() and our flock() leaves
// us a file nobody else will find; we open again, this many times at most.
constexpr int kOpenAttempts = 16;

int flock_retrying(int fd, int operation) {
  int result;
  do {
    result = flock(fd, operation);
  } while (result < 0 && errno == EINTR);
  return result;
}

std::string describe_errno(const std::string& path, const char* what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

}  // namespace

// The file `fd` is open on is still the one `path` names.
bool still_named(int fd, const std::string& path) {
  struct stat opened {};
  struct stat named {};
  return fstat(fd, &opened) == 0 && lstat(path.c_str(), &named) == 0 &&
         opened.st_dev == named.st_dev && opened.st_ino == named.st_ino;
}

// Why the file's contents cannot be used by this library; empty when they can.
std::string layout_problem(int fd, off_t file_size) {
  LedgerHeader header{};
  if (file_size < static_cast<off_t>(sizeof header) ||
      pread(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header))
    return "is too short to be a gpulimit ledger (damaged?)";
  if (header.magic != kLedgerMagic) return "is not a gpulimit ledger (damaged?)";
  if (header.layout_version != kLedgerLayoutVersion)
    return "has ledger layout version " + std::to_string(header.layout_version) +
           ", this library uses version " + std::to_string(kLedgerLayoutVersion);
  if (header.layout_size != sizeof(LedgerLayout) || file_size < off_t{sizeof(LedgerLayout)})
    return "is damaged: its layout size does not match version " +
           std::to_string(kLedgerLayoutVersion);
  return {};
}

std::string counts_problem(const LedgerLayout& layout) {
  if (layout.max_devices != kMaxDevices || layout.max_processes != kMaxProcesses ||
      layout.device_count.load(std::memory_order_relaxed) > kMaxDevices ||
      layout.slot_high_water.load(std::memory_order_relaxed) > kMaxProcesses)
    return "is damaged: its device or process counts are out of range";
  return {};
}

LedgerLayout* map_file(int fd) {
  void* mapping = mmap(nullptr, sizeof(LedgerLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return mapping == MAP_FAILED ? nullptr : static_cast<LedgerLayout*>(mapping);
}

namespace {

// A fresh, zeroed file of this layout. Called with the creation lock held and
// no process attached, so nobody looks at the file meanwhile.
LedgerLayout* rebuild(int fd, const std::string& path, std::string& error) {
  if (ftruncate(fd, 0) < 0) {
    error = describe_errno(path, "cannot empty the ledger to rebuild it");
    return nullptr;
  }
  // Allocated now so that a full /dev/shm is an error here rather than a
  // SIGBUS later, at the first touch of a page in the middle of a reserve.
  if (const int failed = posix_fallocate(fd, 0, sizeof(LedgerLayout))) {
    errno = failed;
    error = describe_errno(path, "cannot allocate the ledger");
    return nullptr;
  }
  LedgerLayout* layout = map_file(fd);
  if (!layout) {
    error = describe_errno(path, "cannot map the ledger");
    return nullptr;
  }
  layout->header.layout_version = kLedgerLayoutVersion;
  layout->header.layout_size = sizeof(LedgerLayout);
  layout->max_devices = kMaxDevices;
  layout->max_processes = kMaxProcesses;
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
  pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
  const int failed = pthread_mutex_init(&layout->reaper_mutex, &attributes);
  pthread_mutexattr_destroy(&attributes);
  if (failed) {
    unmap_layout(layout);
    errno = failed;
    error = describe_errno(path, "cannot set up the ledger's mutex");
    return nullptr;
  }
  // Last, so that a builder killed half-way leaves a file that is not taken
  // for a ledger. A release store rather than a fence: GCC's TSan refuses fences.
  std::atomic_ref<uint64_t>(layout->header.magic).store(kLedgerMagic, std::memory_order_release);
  return layout;
}

}  // namespace

LockedLedgerFile::LockedLedgerFile(const std::string& path, std::string& error) {
  for (int attempt = 0; attempt < kOpenAttempts; ++attempt) {
    // O_NOFOLLOW: the directory is shared (/dev/shm); a symlink planted under
    // our name must not make us create or truncate another file.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      error = describe_errno(path, "cannot open the ledger");
      return;
    }
    struct stat status {};
    if (fstat(fd, &status) < 0) {
      error = describe_errno(path, "cannot stat the ledger");
      close(fd);
      return;
    }
    if (!S_ISREG(status.st_mode) || status.st_uid != geteuid()) {
      error = path + ": belongs to uid " + std::to_string(status.st_uid) + ", not to this user (" +
              std::to_string(geteuid()) + ") or is not a regular file; refusing to use it";
      close(fd);
      return;
    }
    if (flock_retrying(fd, LOCK_EX) < 0) {
      error = describe_errno(path, "cannot lock the ledger");
      close(fd);
      return;
    }
    if (still_named(fd, path)) {
      fd_ = fd;
      return;
    }
    close(fd);
  }
  error = path + ": removed again and again while being opened; giving up";
}

LockedLedgerFile::~LockedLedgerFile() {
  if (fd_ < 0) return;
  flock_retrying(fd_, LOCK_UN);
  close(fd_);
}

int LockedLedgerFile::release() {
  flock_retrying(fd_, LOCK_UN);
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

LedgerLayout* LockedLedgerFile::map(const std::string& path, std::string& error) {
  // Nobody attached: start from a fresh file whatever this one holds, so a
  // new job of the tenant starts from its own caps.
  if (!liveness::any_held_by_other(fd_)) return rebuild(fd_, path, error);

  struct stat status {};
  if (fstat(fd_, &status) < 0) {
    error = describe_errno(path, "cannot stat the ledger");
    return nullptr;
  }
  std::string problem = layout_problem(fd_, status.st_size);
  LedgerLayout* layout = nullptr;
  if (problem.empty()) {
    layout = map_file(fd_);
    if (!layout) {
      error = describe_errno(path, "cannot map the ledger");
      return nullptr;
    }
    problem = counts_problem(*layout);
  }
  if (problem.empty()) return layout;
  if (layout) unmap_layout(layout);
  error = path + ": " + problem + ", and running processes use it; refusing to rebuild it";
  return nullptr;
}

void unmap_layout(LedgerLayout* layout) noexcept {
  munmap(layout, sizeof(LedgerLayout));
}

bool ledger_is_stale(const std::string& path, uid_t owner, bool remove) noexcept {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat status {};
  bool stale = fstat(fd, &status) == 0 && S_ISREG(status.st_mode) && status.st_uid == owner &&
               flock_retrying(fd, LOCK_EX | LOCK_NB) == 0;  // else a process is opening it
  stale = stale && !liveness::any_held_by_other(fd);
  if (stale && remove) stale = still_named(fd, path) && unlink(path.c_str()) == 0;
  close(fd);  // drops the flock too
  return stale;
}

}  // namespace gpulimit::shm
