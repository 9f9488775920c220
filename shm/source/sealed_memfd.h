// What the board and the lease pages share: an anonymous memory file the
// server writes and hands its clients read-only.
//
// A client must never be able to write such a file, nor change its size
// under the server (a shrunk file turns the server's next access into
// SIGBUS):
//   - the file is sealed against growing and shrinking, and the seals sealed;
//   - its mode is 0400 once built, so reopening a client's descriptor through
//     /proc/<pid>/fd/N for writing is refused, and a read-only descriptor
//     cannot be mapped or mprotect()ed writable.
#pragma once

#include <cstddef>
#include <string>

namespace gpulimit::shm {

// A new memfd of `size` zero bytes, sealed, mapped read-write at `*mapping`.
// -1, with a one-line `error` ("cannot <what>: ..."), on failure.
int create_sealed_memfd(const char* name, const char* what, std::size_t size, void** mapping,
                        std::string& error);

// Makes the file read-only for whoever reopens it (mode 0400), once built.
bool make_read_only(int fd, const char* what, std::string& error);

// A new read-only descriptor of `fd`'s file, for a client (O_RDONLY |
// O_CLOEXEC; the caller closes it). -1 on failure. Reopening through /proc
// gives a new open file description with its own access mode; dup() would
// share the server's read-write one.
int reopen_read_only(int fd) noexcept;

std::string describe_errno(const char* what);

// Short enough for the string's inline buffer: assigning it cannot throw.
inline void note_out_of_memory(std::string& error) noexcept {
  error = "out of memory";
}

}  // namespace gpulimit::shm
