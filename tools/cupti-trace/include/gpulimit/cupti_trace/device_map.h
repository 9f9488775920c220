// From CUPTI's device ids to the physical device indices of the trace.
//
// A kernel record names its device by CUPTI's id, which need not be the
// physical index (nvidia-smi's, NVML's): with CUDA_VISIBLE_DEVICES=2 the only
// device a process sees is ordinal 0. CUPTI's device records (kind DEVICE)
// give each id the device's UUID, and NVML finds the physical index of a
// UUID. The map holds what the device records taught; it never allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace gpulimit::cupti_trace {

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx": how NVML and nvidia-smi write
// a device UUID, with its terminating NUL.
inline constexpr std::size_t kUuidTextBytes = 41;
void format_uuid(const unsigned char (&bytes)[16], char (&text)[kUuidTextBytes]);

class DeviceMap {
 public:
  // More than any machine has; ids beyond are never learnt.
  static constexpr uint32_t kMaxDevices = 64;

  // A device record: CUPTI device `cupti_id` has the physical index
  // `physical`, or an unknown one when NVML did not know its UUID.
  void learn(uint32_t cupti_id, std::optional<uint32_t> physical);

  struct Resolution {
    uint32_t physical = 0;
    bool from_device_record = false;  // false: `physical` is CUPTI's id itself
  };
  // The physical index of `cupti_id`: the one learnt, else the id itself,
  // which is right whenever every device is visible in its physical order.
  Resolution resolve(uint32_t cupti_id) const;

 private:
  // physical index + 1; 0: nothing learnt.
  uint32_t physical_plus_one_[kMaxDevices] = {};
};

}  // namespace gpulimit::cupti_trace
