// The board in an anonymous memory file (memfd). The server maps it
// read-write; every client maps a read-only descriptor of it.
//
// A client must never be able to write the board, nor change its size under
// the server (a shrunk file turns the server's next access into SIGBUS):
//   - the file is sealed against growing and shrinking, and the seals sealed;
//   - its mode is 0400 once built, so reopening a client's descriptor through
//     /proc/<pid>/fd/N for writing is refused, and a read-only descriptor
//     cannot be mapped or mprotect()ed writable.
#include "gpulimit/shm/board_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

namespace gpulimit::shm {
namespace {

std::string describe_errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// Short enough for the string's inline buffer: assigning it cannot throw.
void note_out_of_memory(std::string& error) noexcept {
  error = "out of memory";
}

void close_keeping_errno(int fd) {
  const int saved = errno;
  ::close(fd);
  errno = saved;
}

// Why the board in `fd` cannot be read by this library; empty when it can.
std::string layout_problem(int fd) {
  struct stat status {};
  if (fstat(fd, &status) < 0) return describe_errno("cannot stat gpulimitd's board");
  BoardHeader header{};
  if (status.st_size < static_cast<off_t>(sizeof header) ||
      pread(fd, &header, sizeof header, 0) != static_cast<ssize_t>(sizeof header))
    return "gpulimitd's board is too short to be a board";
  if (header.magic != kBoardMagic) return "gpulimitd's board is not a gpulimit board";
  if (header.layout_version != kBoardLayoutVersion)
    return "gpulimitd's board has layout " + std::to_string(header.layout_version) +
           ", this library reads layout " + std::to_string(kBoardLayoutVersion);
  if (header.layout_size != sizeof(BoardLayout) ||
      status.st_size < static_cast<off_t>(sizeof(BoardLayout)))
    return "gpulimitd's board has the size " + std::to_string(header.layout_size) + " for layout " +
           std::to_string(kBoardLayoutVersion) + ", this library expects " +
           std::to_string(sizeof(BoardLayout));
  return {};
}

}  // namespace

std::unique_ptr<BoardMapping> BoardMapping::create(uint32_t quantum_us,
                                                   std::string& error) noexcept {
  try {
    const int fd = memfd_create("gpulimit-board", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
      error = describe_errno("cannot create the board (memfd_create)");
      return nullptr;
    }
    if (ftruncate(fd, sizeof(BoardLayout)) < 0) {
      error = describe_errno("cannot size the board");
      close_keeping_errno(fd);
      return nullptr;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
      error = describe_errno("cannot seal the board's size");
      close_keeping_errno(fd);
      return nullptr;
    }
    void* mapping = mmap(nullptr, sizeof(BoardLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED) {
      error = describe_errno("cannot map the board");
      close_keeping_errno(fd);
      return nullptr;
    }
    // A fresh memfd reads as zeros: every token is 0 and no device is
    // published. The header's magic goes last, so a half-built board is never
    // taken for one.
    auto* layout = static_cast<BoardLayout*>(mapping);
    layout->header.layout_version = kBoardLayoutVersion;
    layout->header.layout_size = sizeof(BoardLayout);
    layout->max_devices = kBoardDevices;
    layout->device_count.store(0, std::memory_order_relaxed);
    layout->server_pid = static_cast<int32_t>(getpid());
    layout->quantum_us = quantum_us;
    std::atomic_ref<uint64_t>(layout->header.magic).store(kBoardMagic, std::memory_order_release);
    if (fchmod(fd, 0400) < 0) {
      error = describe_errno("cannot make the board read-only for its clients");
      munmap(mapping, sizeof(BoardLayout));
      close_keeping_errno(fd);
      return nullptr;
    }
    return std::unique_ptr<BoardMapping>(new BoardMapping(fd, layout, true));
  } catch (const std::bad_alloc&) {
    note_out_of_memory(error);
    return nullptr;
  }
}

std::unique_ptr<BoardMapping> BoardMapping::map_read_only(int fd, std::string& error) noexcept {
  try {
    if (std::string problem = layout_problem(fd); !problem.empty()) {
      error = std::move(problem);
      return nullptr;
    }
    void* mapping = mmap(nullptr, sizeof(BoardLayout), PROT_READ, MAP_SHARED, fd, 0);
    if (mapping == MAP_FAILED) {
      error = describe_errno("cannot map gpulimitd's board");
      return nullptr;
    }
    return std::unique_ptr<BoardMapping>(
        new BoardMapping(fd, static_cast<BoardLayout*>(mapping), false));
  } catch (const std::bad_alloc&) {
    note_out_of_memory(error);
    return nullptr;
  }
}

BoardMapping::~BoardMapping() {
  munmap(layout_, sizeof(BoardLayout));
  ::close(fd_);
}

int BoardMapping::read_only_descriptor() const noexcept {
  // Reopening through /proc gives a new open file description with its own
  // access mode; dup() would share this one's read-write mode.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd_);
  int fd;
  do {
    fd = ::open(path, O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

}  // namespace gpulimit::shm
