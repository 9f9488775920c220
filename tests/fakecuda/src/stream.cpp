// Streams, events and synchronisation.
#include "stream.h"

#include "context.h"
#include "executor.h"
#include "graph.h"
#include "memory.h"

using namespace fakecuda;

namespace fakecuda {

Op action_op(std::function<void(uint64_t)> action) {
  Op op;
  op.kind = Op::Kind::kAction;
  op.action = std::move(action);
  return op;
}

CUresult submit_locked(CUstream handle, DefaultStream mode, Op op, CUstream_st** used) {
  Driver& d = Driver::get();
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  if (used) *used = s;
  if (s->capture) return capture_op_locked(s, std::move(op));
  if (s->kind == CUstream_st::Kind::kLegacy)
    if (CUresult r = check_legacy_use_locked(s); r != CUDA_SUCCESS) return r;
  d.executor().enqueue_locked(s, std::move(op));
  return CUDA_SUCCESS;
}

CUresult submit_and_wait(std::unique_lock<std::mutex>& lock, DefaultStream mode, Op op) {
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(nullptr, mode, &s); r != CUDA_SUCCESS) return r;
  if (s->capture) {
    invalidate_capture_locked(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (CUresult r = submit_locked(s, mode, std::move(op)); r != CUDA_SUCCESS) return r;
  Driver::get().executor().wait_stream_idle(lock, s);
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

namespace {

CUresult stream_create(CUstream* phStream, unsigned int flags, int priority) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(phStream, CUDA_ERROR_INVALID_VALUE);
  FAKECUDA_REQUIRE((flags & ~CU_STREAM_NON_BLOCKING) == 0, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  // Priorities outside [greatest, least] are clamped, as documented.
  priority = std::min(0, std::max(-5, priority));
  *phStream = new_stream(ctx, CUstream_st::Kind::kUser, flags, priority);
  return CUDA_SUCCESS;
}

CUresult stream_synchronize(CUstream handle, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  if (s->capture) {
    // Synchronising a capturing stream is illegal and ends the capture.
    invalidate_capture_locked(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (s->kind == CUstream_st::Kind::kLegacy)
    if (CUresult r = check_legacy_use_locked(s); r != CUDA_SUCCESS) return r;
  d.executor().wait_stream_idle(lock, s);
  trim_pools_after_sync_locked(s->ctx->physical);
  return CUDA_SUCCESS;
}

CUresult stream_query(CUstream handle, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  if (s->capture) {
    invalidate_capture_locked(s);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return s->queue.empty() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult stream_wait_event(CUstream handle, CUevent event, unsigned int flags, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE((flags & ~CU_EVENT_WAIT_EXTERNAL) == 0, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(event, kEventMagic), CUDA_ERROR_INVALID_HANDLE);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  if (event->capture) {
    // Waiting on an event recorded in a capture joins the capture (fork/join).
    if (!s->capture) {
      if (event->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      s->capture = event->capture;
      s->capture_tail = event->capture_nodes;
      event->capture->streams.push_back(s);
      return CUDA_SUCCESS;
    }
    if (s->capture != event->capture) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    for (CUgraphNode_st* node : event->capture_nodes)
      s->capture_tail.push_back(node);
    return CUDA_SUCCESS;
  }
  const uint64_t generation = recorded_generation(event);
  if (generation == 0) return CUDA_SUCCESS;  // never recorded: nothing to wait for
  if (s->capture) {
    // An event recorded outside the capture cannot be waited on inside it.
    invalidate_capture_locked(s);
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  Op op;
  op.kind = Op::Kind::kWaitEvent;
  op.event = event;
  op.generation = generation;
  return submit_locked(s, mode, std::move(op));
}

CUresult event_record(CUevent event, CUstream handle, DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(event, kEventMagic), CUDA_ERROR_INVALID_HANDLE);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  if (s->capture) {
    if (s->capture->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    event->capture = s->capture;
    event->capture_nodes = s->capture_tail;
    return CUDA_SUCCESS;
  }
  event->capture = nullptr;
  event->capture_nodes.clear();
  // An interprocess event counts its generations with the processes that
  // share it.
  const uint64_t generation = event->ipc
                                  ? event->ipc->recorded.fetch_add(1, std::memory_order_acq_rel) + 1
                                  : event->recorded + 1;
  event->recorded = generation;
  Op op = action_op([event, generation](uint64_t done_ns) {
    event->completed = generation;
    event->time_ns = done_ns;
    if (IpcEventPage* page = event->ipc) {
      uint64_t seen = page->completed.load(std::memory_order_relaxed);
      while (seen < generation &&
             !page->completed.compare_exchange_weak(seen, generation, std::memory_order_release))
        ;
    }
  });
  op.event = event;
  return submit_locked(s, mode, std::move(op));
}

CUresult elapsed(float* ms, CUevent start, CUevent end) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(ms, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(start, kEventMagic) && d.is_live(end, kEventMagic),
                   CUDA_ERROR_INVALID_HANDLE);
  if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (start->recorded == 0 || end->recorded == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (start->completed < start->recorded || end->completed < end->recorded)
    return CUDA_ERROR_NOT_READY;
  const double delta = static_cast<double>(static_cast<int64_t>(end->time_ns - start->time_ns));
  *ms = static_cast<float>(delta / 1e6);
  return CUDA_SUCCESS;
}

}  // namespace

// ---- Streams ----------------------------------------------------------------------

FAKECUDA_EXPORT CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  return stream_create(phStream, Flags, 0);
}

FAKECUDA_EXPORT CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags,
                                                    int priority) {
  return stream_create(phStream, flags, priority);
}

FAKECUDA_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hStream, kStreamMagic) && hStream->kind == CUstream_st::Kind::kUser,
                   CUDA_ERROR_INVALID_HANDLE);
  if (hStream->capture) invalidate_capture_locked(hStream);
  d.live.erase(hStream);
  // Work already queued still runs; the executor frees the stream after it.
  if (!hStream->queue.empty()) {
    hStream->destroyed = true;
    return CUDA_SUCCESS;
  }
  auto& owned = hStream->ctx->streams;
  owned.erase(std::remove(owned.begin(), owned.end(), hStream), owned.end());
  delete hStream;
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuStreamDestroy(CUstream hStream) {
  return cuStreamDestroy_v2(hStream);
}

FAKECUDA_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  return stream_synchronize(s, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) {
  return stream_synchronize(s, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamQuery(CUstream s) {
  return stream_query(s, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamQuery_ptsz(CUstream s) {
  return stream_query(s, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  return stream_wait_event(s, e, flags, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags) {
  return stream_wait_event(s, e, flags, DefaultStream::kPerThread);
}

#define FAKECUDA_STREAM_GETTER(name, type, expr)                                    \
  static CUresult name##_impl(CUstream handle, type* out, DefaultStream mode) {     \
    FAKECUDA_REQUIRE_INIT();                                                        \
    FAKECUDA_REQUIRE(out, CUDA_ERROR_INVALID_VALUE);                                \
    std::lock_guard<std::mutex> guard(Driver::get().mu);                            \
    CUstream_st* s = nullptr;                                                       \
    if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r; \
    *out = (expr);                                                                  \
    return CUDA_SUCCESS;                                                            \
  }                                                                                 \
  FAKECUDA_EXPORT CUresult name(CUstream handle, type* out) {                       \
    return name##_impl(handle, out, DefaultStream::kLegacy);                        \
  }                                                                                 \
  FAKECUDA_EXPORT CUresult name##_ptsz(CUstream handle, type* out) {                \
    return name##_impl(handle, out, DefaultStream::kPerThread);                     \
  }

FAKECUDA_STREAM_GETTER(cuStreamGetFlags, unsigned int, s->flags)
FAKECUDA_STREAM_GETTER(cuStreamGetPriority, int, s->priority)
FAKECUDA_STREAM_GETTER(cuStreamGetCtx, CUcontext, s->ctx)
FAKECUDA_STREAM_GETTER(cuStreamGetId, unsigned long long, s->id)
FAKECUDA_STREAM_GETTER(cuStreamGetDevice, CUdevice, s->ctx->ordinal)

// CUDA 12.5: also the green context, which the simulator never has.
static CUresult stream_get_ctx_v2(CUstream handle, CUcontext* pctx, CUgreenCtx* green,
                                  DefaultStream mode) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(pctx && green, CUDA_ERROR_INVALID_VALUE);
  std::lock_guard<std::mutex> guard(Driver::get().mu);
  CUstream_st* s = nullptr;
  if (CUresult r = resolve_stream(handle, mode, &s); r != CUDA_SUCCESS) return r;
  *pctx = s->ctx;
  *green = nullptr;
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuStreamGetCtx_v2(CUstream s, CUcontext* pctx, CUgreenCtx* green) {
  return stream_get_ctx_v2(s, pctx, green, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuStreamGetCtx_v2_ptsz(CUstream s, CUcontext* pctx, CUgreenCtx* green) {
  return stream_get_ctx_v2(s, pctx, green, DefaultStream::kPerThread);
}

// ---- Context and device synchronisation --------------------------------------------

static CUresult context_synchronize(CUcontext ctx) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  if (CUresult r = capture_forbids_unsafe_call_locked(); r != CUDA_SUCCESS) return r;
  if (!ctx)
    if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  FAKECUDA_REQUIRE(live_context(ctx), CUDA_ERROR_INVALID_CONTEXT);
  d.executor().wait_context_idle(lock, ctx);
  trim_pools_after_sync_locked(ctx->physical);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuCtxSynchronize() {
  return context_synchronize(nullptr);
}
// CUDA 13: the context is named; NULL means the current one.
FAKECUDA_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  return context_synchronize(ctx);
}

// ---- Events ----------------------------------------------------------------------------

FAKECUDA_EXPORT CUresult cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  FAKECUDA_REQUIRE_INIT();
  FAKECUDA_REQUIRE(phEvent, CUDA_ERROR_INVALID_VALUE);
  constexpr unsigned kKnown =
      CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  FAKECUDA_REQUIRE((Flags & ~kKnown) == 0, CUDA_ERROR_INVALID_VALUE);
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = current_context_checked(&ctx); r != CUDA_SUCCESS) return r;
  auto* e = new CUevent_st{};
  e->magic = kEventMagic;
  e->ctx = ctx;
  e->flags = Flags;
  d.live.insert(e);
  *phEvent = e;
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hEvent, kEventMagic), CUDA_ERROR_INVALID_HANDLE);
  d.live.erase(hEvent);
  // Queued records and waits may still refer to it.
  hEvent->destroyed = true;
  if (hEvent->pending == 0) delete hEvent;
  return CUDA_SUCCESS;
}
FAKECUDA_EXPORT CUresult cuEventDestroy(CUevent hEvent) {
  return cuEventDestroy_v2(hEvent);
}

FAKECUDA_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  return event_record(e, s, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  return event_record(e, s, DefaultStream::kPerThread);
}
FAKECUDA_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags) {
  FAKECUDA_REQUIRE((flags & ~CU_EVENT_RECORD_EXTERNAL) == 0, CUDA_ERROR_INVALID_VALUE);
  return event_record(e, s, DefaultStream::kLegacy);
}
FAKECUDA_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags) {
  FAKECUDA_REQUIRE((flags & ~CU_EVENT_RECORD_EXTERNAL) == 0, CUDA_ERROR_INVALID_VALUE);
  return event_record(e, s, DefaultStream::kPerThread);
}

FAKECUDA_EXPORT CUresult cuEventQuery(CUevent hEvent) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::lock_guard<std::mutex> guard(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hEvent, kEventMagic), CUDA_ERROR_INVALID_HANDLE);
  return completed_generation(hEvent) >= recorded_generation(hEvent) ? CUDA_SUCCESS
                                                                     : CUDA_ERROR_NOT_READY;
}

FAKECUDA_EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
  FAKECUDA_REQUIRE_INIT();
  Driver& d = Driver::get();
  std::unique_lock<std::mutex> lock(d.mu);
  FAKECUDA_REQUIRE(d.is_live(hEvent, kEventMagic), CUDA_ERROR_INVALID_HANDLE);
  const uint64_t generation = recorded_generation(hEvent);
  ++hEvent->pending;  // keeps it alive should another thread destroy it meanwhile
  d.executor().wait_event(lock, hEvent, generation);
  const uint32_t physical = hEvent->ctx->physical;
  if (--hEvent->pending == 0 && hEvent->destroyed) delete hEvent;
  trim_pools_after_sync_locked(physical);
  return CUDA_SUCCESS;
}

FAKECUDA_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  return elapsed(ms, start, end);
}
FAKECUDA_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  return elapsed(ms, start, end);
}
