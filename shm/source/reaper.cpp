// The reaper's side of the protocol described at the top of tenant_ledger.cpp.

#include "reaper.h"

#include <sched.h>
#include <time.h>

#include <cerrno>
#include <chrono>

#include "gpulimit/shm/futex.h"
#include "liveness_lock.h"
#include "test_seam.h"

namespace gpulimit::shm {
namespace {

using Clock = std::chrono::steady_clock;

// How long a recount waits for live processes to leave reserve/release. The
// section takes nanoseconds; a process still inside after this is stopped
// (SIGSTOP, a debugger) or starved, and the recount gives up rather than
// wedge the tenant.
constexpr auto kInFlightBound = std::chrono::milliseconds(100);
// Spins (with sched_yield) before sleeping between looks at a slot.
constexpr int kYieldingLooks = 64;
constexpr auto kSleepBetweenLooks = std::chrono::microseconds(100);
// How often, in looks, to ask the kernel again whether a slot still in
// flight is alive: the question is a system call.
constexpr int kLooksPerLivenessCheck = 16;
// A reserver waiting on an odd sequence checks after each slice whether the
// reaper died (a failed trylock when it did not). A live reaper is asked a
// few times per recount at most; a dead one costs its waiters one slice.
constexpr auto kRecountWaitSlice = std::chrono::milliseconds(10);
static_assert(kRecountWaitSlice < kInFlightBound);

void pause_between_looks(int look) {
  if (look < kYieldingLooks) {
    sched_yield();
    return;
  }
  const timespec pause{0, std::chrono::nanoseconds(kSleepBetweenLooks).count()};
  nanosleep(&pause, nullptr);
}

// C2-C5 of the recount, the sequence being odd.
bool recount_while_odd(const LedgerAccess& access) {
  LedgerLayout& layout = *access.layout;
  const uint32_t slots = slots_ever_taken(layout);
  bool live[kMaxProcesses] = {};
  for (uint32_t i = 0; i < slots; ++i)
    live[i] = layout.slots[i].pid.load(std::memory_order_relaxed) != 0 && slot_is_live(access, i);

  // seq_cst loads: they pair with the reservers' seq_cst increment of
  // inflight followed by their load of the sequence (store→load ordering).
  const auto deadline = Clock::now() + kInFlightBound;
  for (uint32_t i = 0; i < slots; ++i) {
    for (int look = 0; live[i] && layout.slots[i].inflight.load(std::memory_order_seq_cst) != 0;
         ++look) {
      if (look % kLooksPerLivenessCheck == kLooksPerLivenessCheck - 1 && !slot_is_live(access, i)) {
        live[i] = false;  // died in flight: its held goes, whatever state it is in
        break;
      }
      if (Clock::now() > deadline) return false;
      pause_between_looks(look);
    }
  }
  GPULIMIT_SHM_SEAM(kRecountCounting);

  const uint32_t devices = published_devices(layout);
  for (uint32_t d = 0; d < devices; ++d) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < slots; ++i)
      if (live[i]) sum += layout.slots[i].held[d].load(std::memory_order_relaxed);
    layout.devices[d].used.store(sum, std::memory_order_relaxed);
  }
  // Idempotent, so a reaper killed half-way leaves work the next can redo.
  for (uint32_t i = 0; i < slots; ++i) {
    ProcessSlot& slot = layout.slots[i];
    if (live[i] || slot.pid.load(std::memory_order_relaxed) == 0) continue;
    for (auto& held : slot.held)
      held.store(0, std::memory_order_relaxed);
    slot.inflight.store(0, std::memory_order_relaxed);
    slot.pid.store(0, std::memory_order_release);
  }
  return true;
}

// C6: the sequence back to even, which publishes the new used words to
// every reserver that reads it.
void end_recount(LedgerLayout& layout) {
  layout.recount_seq.fetch_add(1, std::memory_order_release);
  futex_wake_all(layout.recount_seq);
}

}  // namespace

bool slot_is_live(const LedgerAccess& access, uint32_t slot) noexcept {
  if (static_cast<int>(slot) == access.own_slot) return true;
  return liveness::held_by_other(access.fd, slot);
}

ReaperLock::ReaperLock(const LedgerAccess& access, Mode mode) noexcept : layout_(access.layout) {
  pthread_mutex_t* mutex = &layout_->reaper_mutex;
  const int result = mode == Mode::kWait ? pthread_mutex_lock(mutex) : pthread_mutex_trylock(mutex);
  if (result == EOWNERDEAD) {
    // The holder died. Whatever it was doing is finished below (a recount),
    // left to the next recount (a half-done attach or detach, whose slot is
    // dead now), or harmless (a device entry not yet published).
    pthread_mutex_consistent(mutex);
  } else if (result != 0) {
    return;  // EBUSY; ENOTRECOVERABLE cannot happen: EOWNERDEAD is always made consistent
  }
  held_ = true;
  const uint32_t seq = layout_->recount_seq.load(std::memory_order_seq_cst);
  if (seq % 2 == 1) {
    recount_while_odd(access);
    end_recount(*layout_);
  }
}

ReaperLock::~ReaperLock() {
  if (held_) pthread_mutex_unlock(&layout_->reaper_mutex);
}

bool recount(const LedgerAccess& access) noexcept {
  LedgerLayout& layout = *access.layout;
  layout.recount_seq.fetch_add(1, std::memory_order_seq_cst);  // odd: reservers now wait
  const bool counted = recount_while_odd(access);
  end_recount(layout);
  return counted;
}

bool has_dead_slot(const LedgerAccess& access) noexcept {
  const uint32_t slots = slots_ever_taken(*access.layout);
  for (uint32_t i = 0; i < slots; ++i)
    if (access.layout->slots[i].pid.load(std::memory_order_relaxed) != 0 &&
        !slot_is_live(access, i))
      return true;
  return false;
}

bool wait_for_own_threads(const ProcessSlot& own) noexcept {
  const auto deadline = Clock::now() + kInFlightBound;
  for (int look = 0; own.inflight.load(std::memory_order_seq_cst) != 0; ++look) {
    if (Clock::now() > deadline) return false;
    pause_between_looks(look);
  }
  return true;
}

void wait_for_recount(const LedgerAccess& access, uint32_t odd_seq) noexcept {
  const std::atomic<uint32_t>& seq = access.layout->recount_seq;
  for (;;) {
    futex_wait(seq, odd_seq, kRecountWaitSlice);
    if (seq.load(std::memory_order_acquire) != odd_seq) return;
    // Still odd after a slice: the reaper may have been killed mid-recount,
    // leaving the mutex to whoever takes it next. Taking it finishes the
    // recount (ReaperLock); a busy mutex means a live reaper still works.
    if (ReaperLock(access, ReaperLock::Mode::kTry).held()) return;
  }
}

}  // namespace gpulimit::shm
