#include "executor.h"

#include <algorithm>
#include <chrono>

#include "driver.h"
#include "trace.h"

namespace fakecuda {
namespace {

std::chrono::steady_clock::time_point device_time(uint64_t ns) {
  // libstdc++'s steady_clock is CLOCK_MONOTONIC, the clock of now_ns().
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

// How often waits on memory or on another process's event look again.
constexpr uint64_t kPollNs = 50'000;

bool older_than(const CUstream_st* stream, uint64_t seq) {
  return !stream->queue.empty() && stream->queue.front().seq < seq;
}

void release_event_ref(CUevent_st* event) {
  if (--event->pending == 0 && event->destroyed) delete event;
}

}  // namespace

void Executor::enqueue_locked(CUstream_st* stream, Op op) {
  op.seq = stream->ctx->next_seq++;
  op.enqueue_ns = now_ns();
  if (op.event) ++op.event->pending;
  stream->queue.push_back(std::move(op));
  if (!started_) {
    started_ = true;
    thread_ = std::thread([this] { run(); });
    thread_.detach();
  }
  wake_.notify_one();
}

bool Executor::ready_locked(CUstream_st* stream, const Op& op, uint64_t* after_ns) const {
  if (op.poll && !op.poll()) return false;
  if (op.kind == Op::Kind::kWaitEvent) {
    if (completed_generation(op.event) < op.generation) return false;
    *after_ns = std::max(*after_ns, op.event->time_ns);
  }
  // Legacy default stream: waits for, and is waited for by, every blocking
  // stream of its context; it starts once what it waited for has finished.
  CUctx_st* ctx = stream->ctx;
  if (stream->kind == CUstream_st::Kind::kLegacy) {
    for (CUstream_st* other : ctx->streams) {
      if (other == stream || !other->blocking()) continue;
      if (older_than(other, op.seq)) return false;
      *after_ns = std::max(*after_ns, other->clock_ns);
    }
  } else if (stream->blocking()) {
    if (older_than(ctx->legacy_stream, op.seq)) return false;
    *after_ns = std::max(*after_ns, ctx->legacy_stream->clock_ns);
  }
  return true;
}

uint64_t Executor::step_locked(std::unique_lock<std::mutex>& lock) {
  Driver& d = Driver::get();
  bool any_progress = false;
  uint64_t earliest = 0;
  for (bool progress = true; progress;) {
    progress = false;
    earliest = 0;
    const uint64_t now = now_ns();
    // Snapshot: contexts and streams may change while a callback runs unlocked.
    std::vector<CUstream_st*> streams;
    for (const CUctx_st* ctx : d.contexts)
      for (CUstream_st* s : ctx->streams)
        if (!s->queue.empty() || s->destroyed) streams.push_back(s);
    bool snapshot_stale = false;
    for (CUstream_st* s : streams) {
      if (s->queue.empty()) continue;
      Op& op = s->queue.front();
      if (op.started) {
        if (op.end_ns > now) {
          earliest = earliest ? std::min(earliest, op.end_ns) : op.end_ns;
          continue;
        }
        if (op.kind == Op::Kind::kKernel) {
          d.tracer().kernel(s->ctx->physical, s->id, op.start_ns, op.end_ns, *op.name);
          d.shared().kernel_done(s->ctx->physical, Interval{op.start_ns, op.end_ns});
        }
        s->clock_ns = std::max(s->clock_ns, op.end_ns);
        s->queue.pop_front();
        progress = true;
        continue;
      }
      uint64_t not_before = std::max(op.enqueue_ns, s->clock_ns);
      if (!ready_locked(s, op, &not_before)) {
        // Memory and other processes' events change without telling us.
        if (op.poll || (op.kind == Op::Kind::kWaitEvent && op.event->ipc)) {
          const uint64_t again = now + kPollNs;
          earliest = earliest ? std::min(earliest, again) : again;
        }
        continue;
      }
      switch (op.kind) {
        case Op::Kind::kKernel: {
          Interval slot = d.shared().reserve(s->ctx->physical, not_before, op.duration_ns);
          op.started = true;
          op.start_ns = slot.start_ns;
          op.end_ns = slot.end_ns;
          break;
        }
        case Op::Kind::kWaitEvent: {
          s->clock_ns = not_before;
          release_event_ref(op.event);
          s->queue.pop_front();
          break;
        }
        case Op::Kind::kAction: {
          s->clock_ns = not_before;
          CUevent_st* event = op.event;
          if (op.run_unlocked) {
            // Keep the op at the head while the callback runs, so that a
            // synchronising thread waits for it. References into a deque
            // survive push_back by other threads.
            op.started = true;
            op.end_ns = ~0ull;
            auto action = std::move(op.action);
            lock.unlock();
            action(not_before);
            lock.lock();
            snapshot_stale = true;  // streams may have come and gone meanwhile
          } else {
            op.action(not_before);
          }
          if (event) release_event_ref(event);
          s->queue.pop_front();
          break;
        }
      }
      progress = true;
      if (snapshot_stale) break;
    }
    // Streams destroyed by the user are freed once they have drained.
    for (CUstream_st* s : snapshot_stale ? std::vector<CUstream_st*>{} : streams) {
      if (!s->destroyed || !s->queue.empty()) continue;
      auto& owned = s->ctx->streams;
      owned.erase(std::remove(owned.begin(), owned.end(), s), owned.end());
      delete s;
    }
    any_progress |= progress;
  }
  if (any_progress) d.progress.notify_all();
  return earliest;
}

void Executor::run() {
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  for (;;) {
    uint64_t next = step_locked(lock);
    if (next == 0)
      wake_.wait(lock);
    else
      wake_.wait_until(lock, device_time(next));
  }
}

void Executor::wait_stream_idle(std::unique_lock<std::mutex>& lock, CUstream_st* stream) {
  Driver::get().progress.wait(lock, [&] { return stream->queue.empty(); });
}

void Executor::wait_context_idle(std::unique_lock<std::mutex>& lock, CUctx_st* ctx) {
  Driver::get().progress.wait(lock, [&] {
    for (CUstream_st* s : ctx->streams)
      if (!s->queue.empty()) return false;
    return true;
  });
}

void Executor::wait_device_idle(std::unique_lock<std::mutex>& lock, int ordinal) {
  Driver& d = Driver::get();
  d.progress.wait(lock, [&] {
    for (CUctx_st* ctx : d.contexts)
      if (ordinal < 0 || ctx->ordinal == ordinal)
        for (CUstream_st* s : ctx->streams)
          if (!s->queue.empty()) return false;
    return true;
  });
}

void Executor::wait_event(std::unique_lock<std::mutex>& lock, CUevent_st* event,
                          uint64_t generation) {
  auto done = [&] { return completed_generation(event) >= generation; };
  if (!event->ipc) {
    Driver::get().progress.wait(lock, done);
    return;
  }
  // Another process may complete it: nobody here is told, so look again.
  while (!done())
    Driver::get().progress.wait_for(lock, std::chrono::nanoseconds(kPollNs));
}

}  // namespace fakecuda
