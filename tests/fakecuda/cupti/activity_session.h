// The simulated CUPTI's one activity session per process: the client's
// buffer callbacks, the kinds it enabled, CUPTI's clock, and the records
// made from what the simulated GPU ran, handed over at each flush.
#pragma once

#include <cupti_activity.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "simulator_kernels.h"

namespace fakecuda::cupti {

class ActivitySession {
 public:
  static ActivitySession& get();

  CUptiResult register_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                 CUpti_BuffersCallbackCompleteFunc completed);
  CUptiResult enable(CUpti_ActivityKind kind);
  CUptiResult register_timestamp_callback(CUpti_TimestampCallbackFunc callback);
  // Now, on CUPTI's clock.
  uint64_t timestamp();
  // Makes records of everything run since the last flush and completes
  // every buffer that holds one. A flush with nothing to report completes
  // no buffer, as the real one.
  CUptiResult flush_all();
  // Records dropped since the last call, because the client declined a
  // buffer.
  size_t take_dropped() { return dropped_.exchange(0); }

 private:
  ActivitySession();

  // A simulator time (CLOCK_MONOTONIC) on CUPTI's clock.
  uint64_t on_cupti_clock(uint64_t monotonic_ns) const;
  void emit(const void* record, size_t size);
  void complete_current();

  std::mutex mu_;  // one flush at a time
  CUpti_BuffersCallbackRequestFunc requested_ = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed_ = nullptr;
  bool kernels_enabled_ = false;
  CUpti_ActivityKind kernel_kind_ = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  bool devices_enabled_ = false;
  bool devices_reported_ = false;
  // CUPTI's clock is CLOCK_REALTIME (the real one's default on Linux) as
  // read once at start and advanced with CLOCK_MONOTONIC, so that it has
  // the real offset and none of an NTP step's jumps; or the client's clock
  // once it registers a timestamp callback, with the offset read then.
  std::atomic<int64_t> clock_offset_ns_;
  std::atomic<CUpti_TimestampCallbackFunc> timestamp_callback_{nullptr};
  TraceFollower trace_;
  uint32_t ordinal_of_physical_[64] = {};
  bool ordinal_known_[64] = {};
  std::set<std::string> names_;  // records point at these until the process ends
  uint32_t next_correlation_id_ = 1;
  // The buffer being filled.
  uint8_t* buffer_ = nullptr;
  size_t buffer_size_ = 0;
  size_t buffer_used_ = 0;
  std::atomic<size_t> dropped_{0};
};

// The size of a record of `kind` as this CUPTI writes it; 0 for kinds it
// never writes.
size_t record_size(CUpti_ActivityKind kind);

}  // namespace fakecuda::cupti
