#include "gate/launch_gate.h"

#include <algorithm>
#include <chrono>

#include "gate/gate_attachment.h"
#include "gate/gate_session.h"

namespace gpulimit::gate {

std::atomic<const GateView*> current_view{nullptr};
thread_local constinit ThreadDevice this_thread_device;

namespace {

// Whether the launch must reach the driver now, whatever the token says: the
// stream is capturing, and captured work does not run (it is recorded into a
// graph), so it takes no GPU time; a capturing stream must never be blocked
// or synchronised. An error of the query (an invalid stream, the legacy
// stream while another stream captures) is the launch's own to give.
bool must_not_wait(CUstream stream, StreamMode mode) {
  auto query = mode == StreamMode::kPerThread ? real_function(real::cuStreamIsCapturing_ptsz)
                                              : real_function(real::cuStreamIsCapturing);
  if (!query) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return query(stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// The slot of the launch's device under `view`, the current context's
// device unless the process sees one device only. On the first launch of
// this thread in a context, records the context for the drain thread before
// anything is launched in it, and caches the answer for the fast path.
int launch_device(const GateView& view) {
  CUcontext context = nullptr;
  auto get_current = real_function(real::cuCtxGetCurrent);
  if (!get_current || get_current(&context) != CUDA_SUCCESS) context = nullptr;
  // No context: the driver refuses the launch (or cannot be used at all, in
  // a forked child); it takes no GPU time.
  if (!context) return GateView::kUngated;
  ThreadDevice& cached = this_thread_device;
  if (cached.view == &view && cached.context == context) return cached.slot;

  int slot = view.single_device;
  if (slot < 0) {
    CUdevice ordinal = -1;
    auto get_device = real_function(real::cuCtxGetDevice);
    if (!get_device || get_device(&ordinal) != CUDA_SUCCESS || ordinal < 0 ||
        ordinal >= kMaxDevices)
      return GateView::kUngated;
    slot = ordinal;
  }
  if (view.session) view.session->record_context(slot, context);
  cached = ThreadDevice{&view, context, slot};
  return slot;
}

// How long a waiting launch sleeps at most before it looks at the grant
// again: one quantum. A lost wake costs the launch at most that, and a
// thread waits with at most one wake a quantum of its own.
std::chrono::nanoseconds look_again_after(const GateSession& session) {
  return std::chrono::microseconds(std::max<uint32_t>(session.quantum_us(), 1000));
}

}  // namespace

void note_context(int ordinal, CUcontext context) noexcept {
  // Views and their sessions are never freed: safe outside a launch.
  const GateView* view = current_view.load(std::memory_order_acquire);
  if (!view || !view->session || !context) return;
  view->session->record_context(view->single_device >= 0 ? view->single_device : ordinal, context);
}

CUresult launch_slow_path(LaunchSlot* slot, uint64_t inside, CUstream stream, StreamMode mode,
                          LaunchCall call, void* launch) noexcept {
  if (!slot) {
    slot = register_launching_thread();
    if (!slot) return call(launch);  // out of memory: this thread launches ungated
    inside = enter_launch(*slot);
  }
  bool capture_checked = false;
  const GateSession* wanted_from = nullptr;
  uint32_t wanted_grant = 0;
  for (;;) {
    const GateView& view = *current_view.load(std::memory_order_acquire);
    if (view.detached) {
      // A forked child: attach as a process of its own, outside the launch.
      leave_launch(*slot, inside);
      attach_in_forked_child();
      inside = enter_launch(*slot);
      // Another thread is attaching, or attaching failed and left the
      // detached view: launch ungated rather than wait for nobody.
      if (current_view.load(std::memory_order_acquire) != &view) continue;
      const CUresult result = call(launch);
      leave_launch(*slot, inside);
      return result;
    }
    const int device = launch_device(view);
    const std::atomic<uint32_t>& word = *view.token[device];
    const uint32_t token = word.load(std::memory_order_acquire);
    if (token == view.held || !view.session) {
      const CUresult result = call(launch);
      leave_launch(*slot, inside);
      return result;
    }
    if (!capture_checked) {
      capture_checked = true;
      if (must_not_wait(stream, mode)) {
        const CUresult result = call(launch);
        leave_launch(*slot, inside);
        return result;
      }
    }
    // Out of the launch while waiting: the drain thread must not wait for a
    // thread that waits for the token.
    leave_launch(*slot, inside);
    GateSession& waiting_in = *view.session;
    // Want again when the token has been granted since the last Want: the
    // grant may have been ours and gone again before this thread woke (the
    // process looked idle meanwhile and gave it back), and the server then
    // no longer counts this tenant as wanting.
    const shm::BoardDevice* board_device = waiting_in.device(device);
    const uint32_t grant = board_device ? board_device->grant.load(std::memory_order_acquire) : 0;
    if (wanted_from != &waiting_in || grant != wanted_grant) {
      waiting_in.connection().send_want(waiting_in.board_index(device));
      wanted_from = &waiting_in;
      wanted_grant = grant;
    }
    // Never for good: the token may leave `token` and come back to it
    // between the load above and the futex call (granted to this tenant,
    // given back as idle, granted to the other one again), and the wakes
    // of those moves come before this thread sleeps. The server then no
    // longer counts this tenant as wanting; only a look at `grant` after
    // the bound, and the Want it sends, ends the wait.
    waiting_in.wait_for(word, token, look_again_after(waiting_in));
    inside = enter_launch(*slot);
  }
}

}  // namespace gpulimit::gate
