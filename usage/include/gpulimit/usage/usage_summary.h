// `gpulimit usage`'s figures: the records of the usage database summed per
// user, group or tenant. Pure: the records and the clock come in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpulimit/usage/usage_records.h"

namespace gpulimit::usage {

enum class GroupBy { kUser, kGroup, kTenant };

struct UsageLine {
  std::string key;          // the user, group or tenant id
  uint64_t tenants = 0;     // tenants summed here
  uint64_t running = 0;     // of those, still running
  double gpu_seconds = 0;   // GPU time (DeviceUsage::held_ns), over all their devices
  double gib_hours = 0;     // memory over time, over all their devices
  uint64_t peak_bytes = 0;  // the highest one tenant reached on one device
  uint64_t oom_denials = 0;
  friend bool operator==(const UsageLine&, const UsageLine&) = default;
};

// One line per key, by GPU time, most first (then by key). A tenant counts
// whole in every group of its user; a tenant keyed by its id sums over the
// server runs and users that used the same id.
std::vector<UsageLine> summarize(const std::vector<TenantUsage>& records, GroupBy by);

}  // namespace gpulimit::usage
