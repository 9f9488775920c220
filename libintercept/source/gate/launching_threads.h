// The threads of this process that launch work under the gate, each with a
// sequence word that says whether it is inside a launch: odd from just before
// the gate reads a token word until the driver call has returned, even
// otherwise.
//
// Before the drain thread drains a device it must know that no thread is past
// the gate check with its launch not yet in the driver's hands. The launching
// side pays two plain stores and compiler barriers (an asymmetric Dekker
// pair); the drain side pays for the order of both: membarrier(2) makes every
// running thread of the process execute a full memory barrier, after which
// a launch that saw the token held is visible as "inside", and any later
// gate check sees the revocation.
//
// The same words tell the drain thread whether the process launched anything
// lately (idle detection): their sum only grows while threads launch.
#pragma once

#include <atomic>
#include <cstdint>

namespace gpulimit::gate {

struct alignas(64) LaunchSlot {
  std::atomic<uint64_t> sequence{0};
  std::atomic<bool> in_use{true};  // false once its thread has exited
  LaunchSlot* next = nullptr;      // the registry's list; slots are reused, never freed
};

// This thread's slot: null until the thread first launches under a gate.
extern thread_local constinit LaunchSlot* this_thread_slot;

// Marks the thread inside a launch. Returns the (odd) value to hand back to
// leave_launch.
inline uint64_t enter_launch(LaunchSlot& slot) noexcept {
  const uint64_t inside = slot.sequence.load(std::memory_order_relaxed) + 1;
  slot.sequence.store(inside, std::memory_order_relaxed);
  // Only the compiler has to keep the token load after this store; the
  // processor's store-load reordering is what the drain side's membarrier is for.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return inside;
}

// Marks the thread out of its launch. Release: whoever sees the thread out
// also sees what the driver call did (the work it queued).
inline void leave_launch(LaunchSlot& slot, uint64_t inside) noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  slot.sequence.store(inside + 1, std::memory_order_release);
}

// A slot for the calling thread (reusing one of an exited thread), stored in
// this_thread_slot. Null when out of memory: the thread then launches ungated.
LaunchSlot* register_launching_thread() noexcept;

// Registers the process for expedited membarriers; once per process (again
// in a forked child). Without them, wait_for_launches_in_flight falls back to
// a barrier of its own thread only, which leaves a window of a few
// instructions on processors that reorder a store after a later load.
void prepare_launch_barrier() noexcept;

// Returns once every thread that was inside a launch when this was called has
// left it. Launches take microseconds; the wait yields, then naps briefly.
void wait_for_launches_in_flight() noexcept;

struct LaunchActivity {
  uint64_t sum = 0;     // of all sequence words: changes with every launch
  bool inside = false;  // a thread is inside a launch now
};
LaunchActivity launch_activity() noexcept;

// In a forked child, where only the forking thread exists: every other slot
// is out of any launch and free. Async-signal-safe.
void forget_other_threads_after_fork() noexcept;

}  // namespace gpulimit::gate
