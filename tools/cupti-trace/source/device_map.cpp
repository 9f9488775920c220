#include "gpulimit/cupti_trace/device_map.h"

#include <cstdio>

namespace gpulimit::cupti_trace {

void format_uuid(const unsigned char (&b)[16], char (&text)[kUuidTextBytes]) {
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
}

void DeviceMap::learn(uint32_t cupti_id, std::optional<uint32_t> physical) {
  if (cupti_id >= kMaxDevices) return;
  physical_plus_one_[cupti_id] = physical && *physical < UINT32_MAX ? *physical + 1 : 0;
}

DeviceMap::Resolution DeviceMap::resolve(uint32_t cupti_id) const {
  if (cupti_id < kMaxDevices && physical_plus_one_[cupti_id] != 0)
    return {.physical = physical_plus_one_[cupti_id] - 1, .from_device_record = true};
  return {.physical = cupti_id, .from_device_record = false};
}

}  // namespace gpulimit::cupti_trace
