#include "gpulimit/usage/usage_summary.h"

#include <algorithm>
#include <map>

namespace gpulimit::usage {

namespace {

std::vector<std::string> keys_of(const TenantUsage& record, GroupBy by) {
  switch (by) {
    case GroupBy::kUser:
      return {record.user};
    case GroupBy::kGroup:
      return record.groups.empty() ? std::vector<std::string>{"-"} : record.groups;
    case GroupBy::kTenant:
      return {record.tenant};
  }
  return {};
}

}  // namespace

std::vector<UsageLine> summarize(const std::vector<TenantUsage>& records, GroupBy by) {
  std::map<std::string, UsageLine> lines;
  for (const TenantUsage& record : records) {
    for (const std::string& key : keys_of(record, by)) {
      UsageLine& line = lines[key];
      line.key = key;
      ++line.tenants;
      if (!record.ended_ns) ++line.running;
      for (const DeviceUsage& device : record.devices) {
        line.gpu_seconds += gpu_seconds(device);
        line.gib_hours += gib_hours(device);
        line.peak_bytes = std::max(line.peak_bytes, device.peak_bytes);
        line.oom_denials += device.oom_denials;
      }
    }
  }
  std::vector<UsageLine> sorted;
  for (auto& [key, line] : lines)
    sorted.push_back(std::move(line));
  std::stable_sort(sorted.begin(), sorted.end(), [](const UsageLine& a, const UsageLine& b) {
    return a.gpu_seconds > b.gpu_seconds;
  });
  return sorted;
}

}  // namespace gpulimit::usage
