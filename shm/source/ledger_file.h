// The ledger's file: opened and created safely in a shared directory, checked
// against this library's layout, rebuilt when no process is attached, mapped.
#pragma once

#include <string>

#include "ledger_layout.h"

namespace gpulimit::shm {

// An open ledger file, with the creation lock (flock) held until destroyed
// or released. Openers hold it from open() until they have taken their slot,
// so nobody rebuilds a file under a process that is attaching to it.
class LockedLedgerFile {
 public:
  // Opens (creating if absent) the file at `path`, owned by this user. On
  // failure fd() is negative and `error` says why, naming the file.
  LockedLedgerFile(const std::string& path, std::string& error);
  LockedLedgerFile(const LockedLedgerFile&) = delete;
  LockedLedgerFile& operator=(const LockedLedgerFile&) = delete;
  // Unlocks and closes, unless release()d.
  ~LockedLedgerFile();

  int fd() const { return fd_; }
  // Maps the layout: rebuilt from scratch when no process is attached, else
  // checked and refused with `error` if it is not of this layout version.
  LedgerLayout* map(const std::string& path, std::string& error);
  // Unlocks and hands the descriptor over to the caller.
  int release();

 private:
  int fd_ = -1;
};

// The file `fd` is open on is still the one `path` names.
bool still_named(int fd, const std::string& path);
// Why a file of `file_size` bytes open as `fd` cannot be used as a ledger of
// this layout; empty when it can.
std::string layout_problem(int fd, off_t file_size);
// Why a mapped layout's counts cannot be trusted; empty when they can.
std::string counts_problem(const LedgerLayout& layout);
// Maps the ledger in `fd` read-write; nullptr on failure (errno set).
LedgerLayout* map_file(int fd);
void unmap_layout(LedgerLayout* layout) noexcept;

// No process attached to the file at `path`, nor opening it. When `remove`,
// the file is unlinked under the creation lock if so.
bool ledger_is_stale(const std::string& path, uid_t owner, bool remove) noexcept;

}  // namespace gpulimit::shm
