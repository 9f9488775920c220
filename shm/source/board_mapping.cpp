// The board in an anonymous memory file (memfd, sealed_memfd.h). The server
// maps it read-write; every client maps a read-only descriptor of it.
#include "gpulimit/shm/board_mapping.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <new>
#include <string>

#include "sealed_memfd.h"

namespace gpulimit::shm {
namespace {

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
    void* mapping = nullptr;
    const int fd =
        create_sealed_memfd("gpulimit-board", "the board", sizeof(BoardLayout), &mapping, error);
    if (fd < 0) return nullptr;
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
    if (!make_read_only(fd, "the board", error)) {
      munmap(mapping, sizeof(BoardLayout));
      ::close(fd);
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
  return reopen_read_only(fd_);
}

}  // namespace gpulimit::shm
