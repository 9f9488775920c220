// CUPTI's activity records, as the tracer reads them: a kernel record to a
// trace line's interval, a device record to the UUID of CUPTI's device id.
#pragma once

#include <cupti_activity.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "gpulimit/cupti_trace/clock_calibration.h"
#include "gpulimit/cupti_trace/device_map.h"
#include "gpulimit/cupti_trace/kernel_line.h"

namespace gpulimit::cupti_trace {

// CUPTI fills kernel records in the newest layout of its own version. Only
// fields of the layout's stable prefix are read here (checked below against
// CUpti_ActivityKernel4, CUDA 9), so a tracer built against one toolkit reads
// the records of another.
#if CUPTI_API_VERSION >= 130000
using KernelActivity = CUpti_ActivityKernel10;
#else
using KernelActivity = CUpti_ActivityKernel9;
#endif
#define GPULIMIT_SAME_OFFSET(field) \
  static_assert(offsetof(KernelActivity, field) == offsetof(CUpti_ActivityKernel4, field))
GPULIMIT_SAME_OFFSET(kind);
GPULIMIT_SAME_OFFSET(start);
GPULIMIT_SAME_OFFSET(end);
GPULIMIT_SAME_OFFSET(deviceId);
GPULIMIT_SAME_OFFSET(streamId);
GPULIMIT_SAME_OFFSET(name);
#undef GPULIMIT_SAME_OFFSET

// CUDA 11.6 and later; the UUID sits where it did in CUpti_ActivityDevice2.
using DeviceActivity = CUpti_ActivityDevice5;
static_assert(offsetof(DeviceActivity, id) == offsetof(CUpti_ActivityDevice2, id));
static_assert(offsetof(DeviceActivity, uuid) == offsetof(CUpti_ActivityDevice2, uuid));

enum class KernelVerdict {
  kept,
  no_timestamps,     // CUPTI had no device memory to time it: start or end is 0
  end_before_start,  // a corrupt record
  outside_clock,     // before CLOCK_MONOTONIC's zero, or beyond 64 bits
  before_fork,       // started before this process was forked: its parent's
};

struct KernelConversion {
  KernelVerdict verdict = KernelVerdict::kept;
  KernelInterval interval;          // meaningful when kept; its name points into `record`
  bool device_from_record = false;  // the device index came from a device record
};

// The trace interval of a kernel record of process `pid`. `forked_at_ns`:
// when `pid` was forked (CLOCK_MONOTONIC), 0 if it was not. A child's CUPTI
// may hand it copies of records its parent made before the fork; the parent
// writes those, and no kernel of the child can start before the child exists.
KernelConversion convert_kernel(const KernelActivity& record, pid_t pid, const ClockOffset& clock,
                                const DeviceMap& devices, uint64_t forked_at_ns = 0);

struct DeviceIdentity {
  uint32_t cupti_id = 0;
  unsigned char uuid[16] = {};
};
DeviceIdentity device_identity(const DeviceActivity& record);

}  // namespace gpulimit::cupti_trace
