// Which devices a Hello may name: the machine's, as NVML lists them.
#include "gpulimit/server/loop/machine_gpus.h"

#include <algorithm>

#include "gpulimit/server/metrics/status_report.h"
#include "gpulimit/server/policy/policy_file.h"

namespace gpulimit::server {

MachineGpus MachineGpus::from_nvml() {
  Result<std::vector<GpuUuid>> listed_by_nvml = nvml_gpu_uuids();
  if (!listed_by_nvml) return unknown(listed_by_nvml.error());
  return listed(std::move(*listed_by_nvml));
}

MachineGpus MachineGpus::listed(std::vector<DeviceUuid> uuids) {
  MachineGpus gpus;
  gpus.known_ = true;
  gpus.uuids_ = std::move(uuids);
  return gpus;
}

MachineGpus MachineGpus::unknown(std::string why) {
  MachineGpus gpus;
  gpus.why_unknown_ = std::move(why);
  return gpus;
}

std::optional<std::string> MachineGpus::refusal(const std::vector<DeviceUuid>& uuids,
                                                ServerMode mode) const {
  if (uuids.empty()) return std::nullopt;
  if (!known_) {
    if (mode == ServerMode::kUser) return std::nullopt;
    return "gpulimitd cannot tell which GPUs this machine has (" + why_unknown_ +
           "), so it serves none";
  }
  for (const DeviceUuid& uuid : uuids)
    if (std::find(uuids_.begin(), uuids_.end(), uuid) == uuids_.end())
      return "the Hello names " + format_gpu_uuid(uuid) + ", which is not one of the " +
             std::to_string(uuids_.size()) + " GPUs NVML lists on this machine";
  return std::nullopt;
}

std::string MachineGpus::describe(ServerMode mode) const {
  if (known_) {
    std::string text = "NVML lists " + std::to_string(uuids_.size()) + " GPU(s)";
    for (std::size_t i = 0; i < uuids_.size(); ++i)
      text += (i == 0 ? ": " : ", ") + format_gpu_uuid(uuids_[i]);
    return text + "; a Hello may name only these";
  }
  return "no NVML view of the GPUs (" + why_unknown_ + "); " +
         (mode == ServerMode::kSystem
              ? std::string("a Hello that names a GPU is refused")
              : std::string("the devices this user's processes name are served as named"));
}

}  // namespace gpulimit::server
