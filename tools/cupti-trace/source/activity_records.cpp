#include "gpulimit/cupti_trace/activity_records.h"

#include <cstring>
#include <optional>

namespace gpulimit::cupti_trace {

KernelConversion convert_kernel(const KernelActivity& record, pid_t pid, const ClockOffset& clock,
                                const DeviceMap& devices, uint64_t forked_at_ns) {
  KernelConversion result;
  // Packed struct: copy the fields out rather than bind references to them.
  const uint64_t start = record.start;
  const uint64_t end = record.end;
  if (start == 0 || end == 0) {
    result.verdict = KernelVerdict::no_timestamps;
    return result;
  }
  if (end < start) {
    result.verdict = KernelVerdict::end_before_start;
    return result;
  }
  const std::optional<uint64_t> start_ns = clock.to_monotonic(start);
  const std::optional<uint64_t> end_ns = clock.to_monotonic(end);
  if (!start_ns || !end_ns) {
    result.verdict = KernelVerdict::outside_clock;
    return result;
  }
  if (*start_ns < forked_at_ns) {
    result.verdict = KernelVerdict::before_fork;
    return result;
  }
  const DeviceMap::Resolution device = devices.resolve(record.deviceId);
  result.device_from_record = device.from_device_record;
  result.interval = {
      .pid = pid,
      .device = device.physical,
      .stream = record.streamId,
      .start_ns = *start_ns,
      .end_ns = *end_ns,
      .name = record.name ? std::string_view(record.name) : std::string_view(),
  };
  return result;
}

DeviceIdentity device_identity(const DeviceActivity& record) {
  DeviceIdentity identity;
  identity.cupti_id = record.id;
  const CUuuid uuid = record.uuid;
  std::memcpy(identity.uuid, uuid.bytes, sizeof identity.uuid);
  return identity;
}

}  // namespace gpulimit::cupti_trace
