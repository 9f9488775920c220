// Runs the process's streams. One thread per process takes the head op of
// each stream when it is ready, reserves device time for kernels on the
// machine-wide timeline (so kernels of all processes run one at a time), and
// completes ops at their end time. Synchronisation calls wait on
// Driver::progress.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>

#include "objects.h"

namespace fakecuda {

class Executor {
 public:
  // Appends `op` to `stream` (caller holds Driver::mu). Wakes the executor.
  void enqueue_locked(CUstream_st* stream, Op op);

  // Blocks until `stream` has no pending op, or `ctx` has none (all streams).
  // Caller holds `lock` on Driver::mu.
  void wait_stream_idle(std::unique_lock<std::mutex>& lock, CUstream_st* stream);
  void wait_context_idle(std::unique_lock<std::mutex>& lock, CUctx_st* ctx);
  // Until every stream of every context on device `ordinal` (every device
  // for -1) is idle.
  void wait_device_idle(std::unique_lock<std::mutex>& lock, int ordinal);
  void wait_event(std::unique_lock<std::mutex>& lock, CUevent_st* event, uint64_t generation);

 private:
  void run();
  // Starts or completes what it can; returns the earliest time something
  // in flight ends (or 0 when nothing is in flight).
  uint64_t step_locked(std::unique_lock<std::mutex>& lock);
  // Whether `op`, at the head of `stream`, may start; raises `*after_ns` to
  // the device time its dependencies finished.
  bool ready_locked(CUstream_st* stream, const Op& op, uint64_t* after_ns) const;

  std::thread thread_;
  std::condition_variable wake_;
  bool started_ = false;
};

}  // namespace fakecuda
