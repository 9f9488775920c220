// The entry points of the simulated libcupti: exactly those the CUPTI tracer
// (tools/cupti-trace) calls, with the documented behaviour of CUDA 13's
// cupti_activity.h and the real record layouts. See README.md.
#include <cupti_activity.h>
#include <cupti_result.h>

#include "activity_session.h"

#define FAKECUPTI_EXPORT extern "C" __attribute__((visibility("default")))

using fakecuda::cupti::ActivitySession;
using fakecuda::cupti::record_size;

FAKECUPTI_EXPORT CUptiResult
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                               CUpti_BuffersCallbackCompleteFunc funcBufferCompleted) {
  return ActivitySession::get().register_callbacks(funcBufferRequested, funcBufferCompleted);
}

FAKECUPTI_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  return ActivitySession::get().enable(kind);
}

FAKECUPTI_EXPORT CUptiResult
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp) {
  return ActivitySession::get().register_timestamp_callback(funcTimestamp);
}

FAKECUPTI_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  if (!timestamp) return CUPTI_ERROR_INVALID_PARAMETER;
  *timestamp = ActivitySession::get().timestamp();
  return CUPTI_SUCCESS;
}

FAKECUPTI_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t /*flag*/) {
  // Every record made here is complete (the simulator traces a kernel when
  // it has ended), so a forced flush returns the same as a default one.
  return ActivitySession::get().flush_all();
}

FAKECUPTI_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext /*context*/,
                                                               uint32_t /*streamId*/,
                                                               size_t* dropped) {
  if (!dropped) return CUPTI_ERROR_INVALID_PARAMETER;
  *dropped = ActivitySession::get().take_dropped();
  return CUPTI_SUCCESS;
}

FAKECUPTI_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer,
                                                        size_t validBufferSizeBytes,
                                                        CUpti_Activity** record) {
  if (!buffer || !record) return CUPTI_ERROR_INVALID_PARAMETER;
  size_t offset = 0;
  if (*record) {
    const size_t size = record_size((*record)->kind);
    if (size == 0) return CUPTI_ERROR_INVALID_KIND;
    offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer) + size;
  }
  if (offset + sizeof(CUpti_Activity) > validBufferSizeBytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  auto* next = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  const size_t size = record_size(next->kind);
  // A record of a kind this CUPTI never writes, or one cut by the end of the
  // valid bytes, is not a record.
  if (size == 0 || offset + size > validBufferSizeBytes) return CUPTI_ERROR_INVALID_KIND;
  *record = next;
  return CUPTI_SUCCESS;
}

FAKECUPTI_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  if (!str) return CUPTI_ERROR_INVALID_PARAMETER;
  switch (result) {
    case CUPTI_SUCCESS:
      *str = "CUPTI_SUCCESS";
      break;
    case CUPTI_ERROR_INVALID_PARAMETER:
      *str = "CUPTI_ERROR_INVALID_PARAMETER";
      break;
    case CUPTI_ERROR_INVALID_OPERATION:
      *str = "CUPTI_ERROR_INVALID_OPERATION";
      break;
    case CUPTI_ERROR_MAX_LIMIT_REACHED:
      *str = "CUPTI_ERROR_MAX_LIMIT_REACHED";
      break;
    case CUPTI_ERROR_INVALID_KIND:
      *str = "CUPTI_ERROR_INVALID_KIND";
      break;
    case CUPTI_ERROR_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_NOT_SUPPORTED";
      break;
    default:
      *str = nullptr;
      return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}
