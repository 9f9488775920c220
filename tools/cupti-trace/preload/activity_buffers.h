// CUPTI's buffer callbacks: hand CUPTI empty buffers, and turn the buffers
// it completes into trace lines.
#pragma once

#include <cupti_activity.h>

#include "gpulimit/cupti_trace/clock_calibration.h"
#include "trace_file.h"

namespace gpulimit::cupti_trace {

// What the callbacks write with. Set once, before the callbacks are
// registered, and not changed afterwards.
void configure_buffers(TraceFile* file, ClockOffset clock);

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                               size_t valid_size);

// Around fork(): held by the forking thread, so that a child never inherits
// the callbacks' lock taken by a thread it does not have.
void lock_buffers_for_fork();
void unlock_buffers_after_fork();
// In the child, which was forked at `now_ns` (CLOCK_MONOTONIC): kernels that
// started earlier are its parent's.
void unlock_buffers_in_child(uint64_t now_ns);

// One line on stderr if kernels were lost (records without timestamps,
// records CUPTI dropped); nothing otherwise. For the end of the process.
void report_losses();

}  // namespace gpulimit::cupti_trace
