#include "run/device_check.h"

#include <algorithm>
#include <vector>

#include "gpulimit/options/option_table.h"
#include "gpulimit/options/values.h"
#include "run/nvml_devices.h"
#include "run/visible_devices.h"

namespace gpulimit::cli {

std::string describe_visible_devices(unsigned count) {
  if (count == 0) return "no device";
  if (count == 1) return "1 device, 0";
  return std::to_string(count) + " devices, 0 to " + std::to_string(count - 1);
}

bool check_device_indices(std::string_view flag_text, std::optional<std::string_view> mask,
                          std::string& error) {
  const std::string flag = std::string(options::option(options::OptionId::kDeviceMem).flag) + " " +
                           std::string(flag_text);
  options::MemoryLimits amounts;
  if (!options::parse_device_amounts(flag_text, amounts, error)) {
    error = flag + ": " + error;
    return false;
  }
  std::vector<std::string> gpu_uuids;
  std::string nvml_error;
  if (!list_gpus(gpu_uuids, nvml_error)) {
    error = flag + ": cannot check the device indices: " + nvml_error;
    return false;
  }
  const unsigned visible = count_visible_devices(gpu_uuids, mask);
  for (const auto& [uuid, amount] : amounts.by_uuid) {
    const bool listed =
        std::any_of(gpu_uuids.begin(), gpu_uuids.end(), [&](const std::string& text) {
          options::DeviceUuid gpu{};
          return options::parse_device_uuid(text, gpu) && gpu == uuid;
        });
    if (listed) continue;
    error = flag + ": no GPU " + options::format_device_uuid(uuid) + " on this machine";
    return false;
  }
  for (const auto& [device, amount] : amounts.by_device) {
    if (device < visible) continue;
    error = flag + ": no device " + std::to_string(device) + ": the job sees " +
            describe_visible_devices(visible);
    if (mask) error += " (CUDA_VISIBLE_DEVICES=" + std::string(*mask) + ")";
    return false;
  }
  return true;
}

}  // namespace gpulimit::cli
