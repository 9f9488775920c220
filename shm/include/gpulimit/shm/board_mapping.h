// The board (board.h) as a process holds it: the server builds it in an
// anonymous memory file and maps it read-write; each client maps the
// read-only descriptor the server hands it and checks that the layout is the
// one it was built for.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpulimit/shm/board.h"

namespace gpulimit::shm {

class BoardMapping {
 public:
  // Server side: a new, empty board (no device published, every token 0),
  // mapped read-write. nullptr with a one-line `error` on failure.
  static std::unique_ptr<BoardMapping> create(uint32_t quantum_us, std::string& error) noexcept;

  // Client side: maps `fd` (which the mapping then owns) read-only. nullptr,
  // with a one-line `error`, when it is not a board or a board of another
  // layout version or size: "gpulimitd's board has layout 2, this library
  // reads layout 1". On failure `fd` stays open, the caller's to close.
  static std::unique_ptr<BoardMapping> map_read_only(int fd, std::string& error) noexcept;

  BoardMapping(const BoardMapping&) = delete;
  BoardMapping& operator=(const BoardMapping&) = delete;
  ~BoardMapping();

  const BoardLayout& layout() const noexcept { return *layout_; }
  // Server side only; nullptr in a read-only mapping.
  BoardLayout* writable() noexcept { return writable_ ? layout_ : nullptr; }

  // Server side: a new read-only descriptor of the board, for a client
  // (O_RDONLY | O_CLOEXEC; the caller closes it). -1 on failure.
  int read_only_descriptor() const noexcept;

 private:
  BoardMapping(int fd, BoardLayout* layout, bool writable) noexcept
      : fd_(fd), layout_(layout), writable_(writable) {}

  int fd_;
  BoardLayout* layout_;
  bool writable_;
};

}  // namespace gpulimit::shm
