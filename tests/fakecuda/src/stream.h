// Submitting work to streams, shared by memcpy/memset, launches, events and
// graphs. Work on a capturing stream becomes a graph node instead of running.
#pragma once

#include <mutex>

#include "driver.h"

namespace fakecuda {

// Resolves `handle` and submits `op` to it, or to its capture (caller holds
// Driver::mu). Returns the resolved stream in `*used` when asked.
CUresult submit_locked(CUstream handle, DefaultStream mode, Op op, CUstream_st** used = nullptr);

// Submits `op` and waits for the stream to drain: the synchronous memcpy and
// memset entry points, which are ordered in the default stream.
CUresult submit_and_wait(std::unique_lock<std::mutex>& lock, DefaultStream mode, Op op);

// An instantaneous op that runs `action` in stream order.
Op action_op(std::function<void(uint64_t)> action);

}  // namespace fakecuda
