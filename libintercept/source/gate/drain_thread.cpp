#include "gate/drain_thread.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <new>

#include "gate/background_thread.h"
#include "gate/gate_session.h"
#include "gate/launching_threads.h"
#include "lookup/real_driver.h"

namespace gpulimit::gate {
namespace {

using Clock = std::chrono::steady_clock;

struct DrainTask {
  GateSession* session;
  int ordinal;
};

// A grant this thread has dealt with (acknowledged, reported idle).
class GrantNote {
 public:
  bool is(uint32_t grant) const { return noted_ && grant_ == grant; }
  void note(uint32_t grant) {
    noted_ = true;
    grant_ = grant;
  }

 private:
  bool noted_ = false;
  uint32_t grant_ = 0;
};

// The drain thread synchronises contexts while the program may be capturing
// a graph on another thread in global mode, which forbids unsafe calls (such
// as cuCtxSynchronize) on every thread that is not in relaxed mode: a
// refused call would invalidate the program's capture.
void relax_capture_mode() {
  auto exchange = real_function(real::cuThreadExchangeStreamCaptureMode);
  if (!exchange) return;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  exchange(&mode);
}

// Waits for what the process queued on the device: every context it
// launched into there, made current on this thread in turn.
void drain_device(GateSession& session, int ordinal) {
  auto push = real_function(real::cuCtxPushCurrent_v2);
  auto pop = real_function(real::cuCtxPopCurrent_v2);
  auto synchronize = real_function(real::cuCtxSynchronize);
  if (!push || !pop || !synchronize) return;
  for (CUcontext context : session.contexts(ordinal)) {
    if (push(context) != CUDA_SUCCESS) {
      session.forget_context(ordinal, context);  // destroyed since
      continue;
    }
    // An error of the program's own work is the program's to see, at its
    // next synchronisation: the device is drained either way.
    synchronize();
    CUcontext popped = nullptr;
    pop(&popped);
  }
}

// Whether the process has launched nothing on any thread for a while.
class IdleWatch {
 public:
  explicit IdleWatch(Clock::duration window) : window_(window) {}

  // Time left until the process counts as idle under `grant`; zero once it does.
  Clock::duration left(uint32_t grant, Clock::time_point now) {
    const LaunchActivity activity = launch_activity();
    if (!grant_.is(grant) || activity.sum != sum_ || activity.inside) {
      grant_.note(grant);
      sum_ = activity.sum;
      since_ = now;
    }
    return std::max(Clock::duration::zero(), since_ + window_ - now);
  }

 private:
  const Clock::duration window_;
  GrantNote grant_;
  uint64_t sum_ = 0;
  Clock::time_point since_{};
};

void* drain(void* argument) {
  const DrainTask task = *static_cast<DrainTask*>(argument);
  delete static_cast<DrainTask*>(argument);
  GateSession& session = *task.session;
  const shm::BoardDevice& device = *session.device(task.ordinal);
  const uint32_t board_device = session.board_index(task.ordinal);
  relax_capture_mode();

  // A quarter quantum: the idle window, and the longest sleep on a revoke
  // already acknowledged.
  const Clock::duration quarter =
      std::chrono::microseconds(std::max<uint32_t>(session.quantum_us() / 4, 1000));
  IdleWatch idle(quarter);
  GrantNote acked;
  GrantNote reported_idle;
  while (!session.closed()) {
    const uint32_t token = device.token.load(std::memory_order_acquire);
    if (token == session.revoked()) {
      // `grant` is written before each grant's token: after token_revoked(me)
      // it still names the grant being revoked, unless the token moved on
      // between the two loads (released, granted to us again): then the
      // number is a later grant's, and acknowledging it would ack that grant
      // before its revoke and leave the revoke unacknowledged. The token read
      // again tells (the server clears it before each grant's number).
      const uint32_t grant = device.grant.load(std::memory_order_acquire);
      if (device.token.load(std::memory_order_acquire) != token) continue;
      if (!acked.is(grant)) {
        wait_for_launches_in_flight();
        drain_device(session, task.ordinal);
        session.connection().send_ack(board_device, grant);
        acked.note(grant);
        continue;
      }
      // Acknowledged: sleep, but not for good. The token can be released,
      // granted to this tenant again and revoked again between the loads
      // above and the futex call, all with their wakes before this thread
      // sleeps: the word holds `token` again, and a new revoke waits for an
      // Ack. The server gives a revoke its ack timeout (five quanta by
      // default) before it counts an overrun.
      session.wait_for(device.token, token, quarter);
      continue;
    } else if (token == session.held() && device.waiting.load(std::memory_order_acquire) > 0) {
      const uint32_t grant = device.grant.load(std::memory_order_acquire);
      if (!reported_idle.is(grant)) {
        const Clock::duration left = idle.left(grant, Clock::now());
        if (left == Clock::duration::zero()) {
          session.connection().send_idle(board_device, grant);
          reported_idle.note(grant);
          continue;
        }
        session.wait_for(device.token, token, left);
        continue;
      }
    }
    session.wait(device.token, token);
  }
  return nullptr;
}

}  // namespace

bool start_drain_threads(GateSession& session) noexcept {
  for (int ordinal = 0; ordinal < kMaxDevices; ++ordinal) {
    if (!session.device(ordinal)) continue;
    auto* task = new (std::nothrow) DrainTask{&session, ordinal};
    if (!task) return false;
    if (!start_background_thread(drain, task, "gpulimit-drain")) {
      delete task;
      return false;
    }
  }
  return true;
}

}  // namespace gpulimit::gate
