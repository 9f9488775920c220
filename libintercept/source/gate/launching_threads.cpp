#include "gate/launching_threads.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <new>

namespace gpulimit::gate {

thread_local constinit LaunchSlot* this_thread_slot = nullptr;

namespace {

// Every slot ever made, newest first; pushed with a CAS, never unlinked, so
// readers walk it without a lock (and a forked child can walk it too).
std::atomic<LaunchSlot*> slots{nullptr};

std::atomic<bool> membarrier_ready{false};

pthread_key_t exit_key;

// At thread exit: the slot is out of any launch (the thread is not in one)
// and can be given to the next thread.
void release_slot(void* slot) {
  static_cast<LaunchSlot*>(slot)->in_use.store(false, std::memory_order_release);
  this_thread_slot = nullptr;
}

bool make_exit_key() {
  static const bool made = [] { return pthread_key_create(&exit_key, release_slot) == 0; }();
  return made;
}

LaunchSlot* claim_free_slot() {
  for (LaunchSlot* slot = slots.load(std::memory_order_acquire); slot; slot = slot->next) {
    bool expected = false;
    if (slot->in_use.compare_exchange_strong(expected, true, std::memory_order_acq_rel))
      return slot;
  }
  return nullptr;
}

long membarrier(int command) {
  return syscall(SYS_membarrier, command, 0, 0);
}

// The fallback of the membarrier: orders what this thread saw of the
// revocation before its loads of the sequence words. ThreadSanitizer
// models no fence, and GCC refuses one under -fsanitize=thread (-Wtsan, an
// error under -Werror). The sanitizer loses nothing here: no happens-before
// edge rests on this fence or on the membarrier (they order a store before a
// load of another word, store buffering, which is no data race), and what a
// launch did reaches this thread through leave_launch's release store, which
// the sanitizer sees. Its runtime still issues the fence, a full barrier.
void full_barrier_of_this_thread() {
#if defined(GPULIMIT_THREAD_SANITIZER) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
  std::atomic_thread_fence(std::memory_order_seq_cst);
#pragma GCC diagnostic pop
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

void pause_briefly(unsigned round) {
  if (round < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    return;
  }
  if (round < 256) {
    sched_yield();
    return;
  }
  const timespec nap{0, 20'000};
  nanosleep(&nap, nullptr);
}

}  // namespace

LaunchSlot* register_launching_thread() noexcept {
  LaunchSlot* slot = claim_free_slot();
  if (!slot) {
    slot = new (std::nothrow) LaunchSlot();
    if (!slot) return nullptr;
    LaunchSlot* head = slots.load(std::memory_order_relaxed);
    do {
      slot->next = head;
    } while (!slots.compare_exchange_weak(head, slot, std::memory_order_release,
                                          std::memory_order_relaxed));
  }
  // Without the key the slot stays taken after the thread exits: a leak of
  // one slot per thread, never a wrong answer.
  if (make_exit_key()) pthread_setspecific(exit_key, slot);
  this_thread_slot = slot;
  return slot;
}

void prepare_launch_barrier() noexcept {
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  const bool ready = supported > 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
                     membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  membarrier_ready.store(ready, std::memory_order_release);
}

void wait_for_launches_in_flight() noexcept {
  if (!membarrier_ready.load(std::memory_order_acquire) ||
      membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
    full_barrier_of_this_thread();
  for (LaunchSlot* slot = slots.load(std::memory_order_acquire); slot; slot = slot->next) {
    const uint64_t seen = slot->sequence.load(std::memory_order_acquire);
    if ((seen & 1) == 0) continue;
    for (unsigned round = 0; slot->sequence.load(std::memory_order_acquire) == seen; ++round)
      pause_briefly(round);
  }
}

LaunchActivity launch_activity() noexcept {
  LaunchActivity activity;
  for (LaunchSlot* slot = slots.load(std::memory_order_acquire); slot; slot = slot->next) {
    const uint64_t sequence = slot->sequence.load(std::memory_order_acquire);
    activity.sum += sequence;
    activity.inside |= (sequence & 1) != 0;
  }
  return activity;
}

void forget_other_threads_after_fork() noexcept {
  for (LaunchSlot* slot = slots.load(std::memory_order_relaxed); slot; slot = slot->next) {
    if (slot == this_thread_slot) continue;
    const uint64_t sequence = slot->sequence.load(std::memory_order_relaxed);
    if (sequence & 1) slot->sequence.store(sequence + 1, std::memory_order_relaxed);
    slot->in_use.store(false, std::memory_order_relaxed);
  }
  // The kernel keeps no membarrier registration for the child's new memory
  // map; the child registers again when it attaches.
  membarrier_ready.store(false, std::memory_order_relaxed);
}

}  // namespace gpulimit::gate
