// The reaper's side of the ledger protocol (described in tenant_ledger.cpp):
// the robust mutex, the recount, and how a reserver that meets a recount
// waits for it, or finishes it when its reaper died.
#pragma once

#include <cstdint>

#include "ledger_layout.h"

namespace gpulimit::shm {

// What a process needs to judge the slots: the mapping, its own descriptor
// of the file (for the liveness locks) and its own slot (-1: none), whose
// lock it cannot see through that descriptor.
struct LedgerAccess {
  LedgerLayout* layout;
  int fd;
  int own_slot;
};

// Holds the reaper mutex for a scope. Whoever takes the mutex first finishes
// a recount its previous holder died in (the sequence is odd), so while the
// lock is held the sequence is even.
class ReaperLock {
 public:
  enum class Mode { kWait, kTry };
  ReaperLock(const LedgerAccess& access, Mode mode) noexcept;
  ReaperLock(const ReaperLock&) = delete;
  ReaperLock& operator=(const ReaperLock&) = delete;
  ~ReaperLock();

  // False when the mutex was busy (kTry) or cannot be recovered.
  bool held() const { return held_; }

 private:
  LedgerLayout* layout_;
  bool held_ = false;
};

// With the reaper lock held: sets every registered device's used to the sum
// of what the live slots hold and clears the dead slots. False, with nothing
// changed, when a live process stayed in flight past the bound.
bool recount(const LedgerAccess& access) noexcept;

// With the reaper lock held: some taken slot belongs to a dead process.
bool has_dead_slot(const LedgerAccess& access) noexcept;

// The slot's process is alive, as far as `access` can tell.
bool slot_is_live(const LedgerAccess& access, uint32_t slot) noexcept;

// Called by detach(), its own threads barred from entering: waits, bounded,
// until none of them is still in flight. False when one stayed past the bound.
bool wait_for_own_threads(const ProcessSlot& own) noexcept;

// Called by a reserver, not in flight, that found the sequence odd at
// `odd_seq`: returns once it has changed.
void wait_for_recount(const LedgerAccess& access, uint32_t odd_seq) noexcept;

}  // namespace gpulimit::shm
