// Whether the process of a slot is alive. Each attached process holds an
// open-file-description (OFD) write lock on one byte of the ledger file, far
// past its end, at kLivenessLockBase + slot. The kernel drops the lock when
// the description's last descriptor closes, which happens when the process
// dies, however it dies. Pids are reused; locks are not.
//
// OFD locks rather than classic POSIX record locks: a POSIX lock belongs to
// the process and goes away when the process closes *any* descriptor of the
// file, and it does not conflict with the process's own locks, so two
// ledgers opened in one process could not see each other. An OFD lock
// belongs to one open() and conflicts with every other.
//
// A lock held through a description never conflicts with a test made through
// the same description: a process cannot see its own slot's lock this way,
// and a forked child, which shares its parent's description, cannot see its
// parent's until it opens the file again.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace gpulimit::shm::liveness {

// Outside any layout version's file, so that its place never changes.
inline constexpr off_t kLivenessLockBase = off_t{1} << 40;

// Takes `slot`'s lock through `fd`; false if another description holds it.
bool take(int fd, uint32_t slot) noexcept;
void drop(int fd, uint32_t slot) noexcept;

// True when another description holds `slot`'s lock. An error counts as held:
// a live process's bytes must never be discarded on a doubt.
bool held_by_other(int fd, uint32_t slot) noexcept;

// True when another description holds any slot's lock, whatever the layout
// version: the whole range from kLivenessLockBase on is tested.
bool any_held_by_other(int fd) noexcept;

}  // namespace gpulimit::shm::liveness
