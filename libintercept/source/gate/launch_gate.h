// The launch gate: the client side of gpulimitd's time-slicing, on the path
// of every kernel and graph launch (hooks_launch.cpp).
//
// Fast path: one relaxed load of the launch device's token word; equal to
// token_held(my tenant) means call the driver. Around it, two plain stores to
// this thread's sequence word (launching_threads.h), so that the drain thread
// can tell when no launch is between the check and the driver. No
// allocation, lock, getenv or system call. The launch's device is the one
// device the process sees, or else the current context's device, cached per
// thread.
//
// Everything else is the slow path (launch_gate.cpp): a thread's first
// launch or a new context, a stream that is capturing (never blocked), the
// wait for the token, a forked child that has not attached yet.
//
// A process without a server configured (no GPULIMIT_SOCKET) has no view:
// each launch hook is one relaxed load away from the driver.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>

#include "gate/launching_threads.h"
#include "gpulimit/shm/board.h"
#include "lookup/real_driver.h"

namespace gpulimit::gate {

class GateSession;

// Which default stream a NULL stream means to the launch: the slow path's
// capture query must ask about the same one.
enum class StreamMode { kLegacy, kPerThread };

// What launches compare against, published whole: a session's view, the
// open view (no server: every launch passes) or the detached view (a forked
// child: every launch takes the slow path, which attaches). Immutable once
// published and never freed: a launch may still read one it loaded before
// the next was published.
struct GateView {
  // Slots of `token`: one per CUDA ordinal up to the board's device count,
  // then one for every device the server does not time-slice.
  static constexpr int kUngated = static_cast<int>(shm::kBoardDevices);
  static constexpr int kSlots = kUngated + 1;

  uint32_t held = 0;                     // token_held(my tenant)
  int single_device = -1;                // >= 0: the process sees only this device: no lookup
  bool detached = false;                 // the detached view
  GateSession* session = nullptr;        // null: the open or the detached view
  std::atomic<uint32_t> always_held{0};  // holds `held`: the word of ungated slots
  const std::atomic<uint32_t>* token[kSlots] = {};
  // Once replaced: the next older replaced view (gate_attachment.cpp).
  mutable const GateView* retired_next = nullptr;
};

// The current view; null when no server is configured (or the first attach
// was refused). Once non-null it never becomes null again.
extern std::atomic<const GateView*> current_view;

// The last (view, context) this thread launched in, and the slot of its
// device. Filled on the slow path, once the context is recorded for draining.
struct ThreadDevice {
  const GateView* view = nullptr;
  CUcontext context = nullptr;
  int slot = 0;
};
extern thread_local constinit ThreadDevice this_thread_device;

// The slot of the current context's device if this thread has launched in
// this context under this view before; -1 otherwise.
[[gnu::always_inline]] inline int cached_device(const GateView& view) noexcept {
  CUcontext context = nullptr;
  const auto get_current = real::cuCtxGetCurrent.load(std::memory_order_relaxed);
  if (!get_current || get_current(&context) != CUDA_SUCCESS) return -1;
  const ThreadDevice& cached = this_thread_device;
  return cached.view == &view && cached.context == context ? cached.slot : -1;
}

// The real variant in `slot`, called; CUDA_ERROR_NOT_FOUND when the driver
// lacks it.
template <typename Fn, typename... Args>
[[gnu::always_inline]] inline CUresult call_real(std::atomic<Fn>& slot, Args... args) {
  const Fn real = real_function(slot);
  return real ? real(args...) : CUDA_ERROR_NOT_FOUND;
}

// The launch as the slow path runs it, perhaps after a wait.
using LaunchCall = CUresult (*)(void* launch);

template <typename Launch>
CUresult call_launch(void* launch) {
  return (*static_cast<Launch*>(launch))();
}

// Everything but the fast path. `slot` is null on a thread's first launch;
// otherwise the thread is inside a launch (`inside`).
CUresult launch_slow_path(LaunchSlot* slot, uint64_t inside, CUstream stream, StreamMode mode,
                          LaunchCall call, void* launch) noexcept;

template <typename Fn, typename... Args>
[[gnu::noinline]] CUresult launch_slowly(LaunchSlot* slot, uint64_t inside, CUstream stream,
                                         StreamMode mode, std::atomic<Fn>& real,
                                         Args... args) noexcept {
  auto driver_call = [&]() -> CUresult { return call_real(real, args...); };
  return launch_slow_path(slot, inside, stream, mode, &call_launch<decltype(driver_call)>,
                          &driver_call);
}

// Calls the real launch `real` with `args` (a launch on `stream`) when this
// process may launch on the device; waits for the token first when it may
// not. The arguments travel by value so that nothing is built for the slow
// path unless it runs.
template <typename Fn, typename... Args>
[[gnu::always_inline]] inline CUresult launch(CUstream stream, StreamMode mode,
                                              std::atomic<Fn>& real, Args... args) noexcept {
  // The one load that says "not gated".
  if (current_view.load(std::memory_order_relaxed) == nullptr) return call_real(real, args...);
  LaunchSlot* const slot = this_thread_slot;
  if (slot == nullptr) return launch_slowly(nullptr, 0, stream, mode, real, args...);
  const uint64_t inside = enter_launch(*slot);
  const GateView& view = *current_view.load(std::memory_order_acquire);
  const int device = view.single_device >= 0 ? view.single_device : cached_device(view);
  if (device >= 0 && view.token[device]->load(std::memory_order_relaxed) == view.held) {
    const CUresult result = call_real(real, args...);
    leave_launch(*slot, inside);
    return result;
  }
  return launch_slowly(slot, inside, stream, mode, real, args...);
}

// Called by the cuInit hook once the real cuInit has succeeded: with a
// server configured, attaches (once per process; again in a forked child).
void attach_after_init() noexcept;

// Called by the context hooks when the process creates or retains a
// context on CUDA device `ordinal`: the drain thread then waits for it at
// each revoke even if its first launch takes the fast path (a thread of a
// process that sees one device does not look up its context there).
void note_context(int ordinal, CUcontext context) noexcept;

}  // namespace gpulimit::gate
