// --device-mem names devices by the ordinals the job will see, or by UUID;
// an index past them, or a UUID of no GPU here, is a mistake worth stopping
// for, not a cap that never applies.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpulimit::cli {

// Checks every device of `flag_text` (a valid --device-mem value) against
// the devices a job with CUDA_VISIBLE_DEVICES = `mask` sees. False with
// `error` set to one line naming --device-mem when a device is unknown or
// NVML cannot tell which devices there are (UUIDs: the GPUs NVML lists).
bool check_device_indices(std::string_view flag_text, std::optional<std::string_view> mask,
                          std::string& error);

// One line saying which devices a job sees: "2 devices, 0 to 1".
std::string describe_visible_devices(unsigned count);

}  // namespace gpulimit::cli
