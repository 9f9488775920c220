#include "activity_buffers.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "diagnostics.h"
#include "gpulimit/cupti_trace/activity_records.h"
#include "gpulimit/cupti_trace/device_map.h"
#include "gpulimit/cupti_trace/kernel_line.h"
#include "physical_index.h"

namespace gpulimit::cupti_trace {
namespace {

// Large enough that a busy process completes a buffer every few thousand
// kernels rather than every few, small enough to be nothing beside a CUDA
// context.
constexpr size_t kBufferBytes = 1 << 20;

struct State {
  std::mutex mu;  // completions may come from CUPTI's thread and an exit flush at once
  TraceFile* file = nullptr;
  std::optional<ClockOffset> clock;
  DeviceMap devices;
  uint64_t forked_at_ns = 0;  // CLOCK_MONOTONIC; 0: not a forked child
  bool warned_device[DeviceMap::kMaxDevices + 1] = {};
  unsigned long long untimed = 0;
  unsigned long long corrupt = 0;
  unsigned long long dropped = 0;
};

State& state() {
  static State instance;
  return instance;
}

void learn_device(State& s, const DeviceActivity& record) {
  const DeviceIdentity identity = device_identity(record);
  char uuid[kUuidTextBytes];
  format_uuid(identity.uuid, uuid);
  const std::optional<uint32_t> physical = physical_index_of(uuid);
  if (!physical) say("NVML does not know device %s (CUPTI device %u)", uuid, identity.cupti_id);
  s.devices.learn(identity.cupti_id, physical);
}

void write_kernel(State& s, const KernelActivity& record) {
  const KernelConversion kernel =
      convert_kernel(record, getpid(), *s.clock, s.devices, s.forked_at_ns);
  switch (kernel.verdict) {
    case KernelVerdict::kept:
      break;
    case KernelVerdict::before_fork:
      return;  // the parent's, which the parent writes
    case KernelVerdict::no_timestamps:
      ++s.untimed;
      return;
    case KernelVerdict::end_before_start:
    case KernelVerdict::outside_clock:
      ++s.corrupt;
      return;
  }
  if (!kernel.device_from_record) {
    const uint32_t slot = std::min(kernel.interval.device, DeviceMap::kMaxDevices);
    if (!s.warned_device[slot]) {
      s.warned_device[slot] = true;
      say("no device record for CUPTI device %u; writing %u as its physical index",
          kernel.interval.device, kernel.interval.device);
    }
  }
  s.file->append(format_line(kernel.interval));
}

// Device records first, so that kernels of the same buffer find their
// device's physical index.
void write_buffer(State& s, uint8_t* buffer, size_t valid_size) {
  for (const bool devices_pass : {true, false}) {
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
      const CUpti_ActivityKind kind = record->kind;
      if (devices_pass && kind == CUPTI_ACTIVITY_KIND_DEVICE)
        learn_device(s, *reinterpret_cast<const DeviceActivity*>(record));
      else if (!devices_pass && (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
                                 kind == CUPTI_ACTIVITY_KIND_KERNEL))
        write_kernel(s, *reinterpret_cast<const KernelActivity*>(record));
    }
  }
}

}  // namespace

void configure_buffers(TraceFile* file, ClockOffset clock) {
  State& s = state();
  std::lock_guard lock(s.mu);
  s.file = file;
  s.clock = clock;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  // Declining (NULL) is allowed: CUPTI then drops records, and says how many.
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                               size_t /*size*/, size_t valid_size) {
  if (!buffer) return;
  State& s = state();
  {
    std::lock_guard lock(s.mu);
    if (s.file && s.clock) write_buffer(s, buffer, valid_size);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS)
      s.dropped += dropped;
  }
  std::free(buffer);
}

void lock_buffers_for_fork() {
  state().mu.lock();
}
void unlock_buffers_after_fork() {
  state().mu.unlock();
}

void unlock_buffers_in_child(uint64_t now_ns) {
  State& s = state();
  s.forked_at_ns = now_ns;
  s.untimed = s.corrupt = s.dropped = 0;  // the parent reports its own
  s.mu.unlock();
}

void report_losses() {
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.untimed + s.corrupt + s.dropped == 0) return;
  say("process %d: kernels missing from the trace: %llu without timestamps, %llu with invalid "
      "ones, %llu records dropped by CUPTI",
      static_cast<int>(getpid()), s.untimed, s.corrupt, s.dropped);
}

}  // namespace gpulimit::cupti_trace
