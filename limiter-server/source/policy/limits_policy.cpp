#include "gpulimit/server/policy/limits_policy.h"

#include <algorithm>

#include "gpulimit/protocol/priority.h"

namespace gpulimit::server {
namespace {

// The compute settings that bind a tenant seeing `uuids`: a share is the
// tenant's on every device, so each setting is the strictest of theirs.
EffectiveLimits compute_limits(const Policy& policy, const PeerIdentity& who,
                               const std::vector<GpuUuid>& uuids) {
  if (uuids.empty()) return policy.limits_for(who, nullptr, 0);
  EffectiveLimits strictest;
  bool first = true;
  for (const GpuUuid& uuid : uuids) {
    const EffectiveLimits limits = policy.limits_for(who, &uuid, 0);
    if (first) {
      strictest = limits;
      first = false;
      continue;
    }
    const auto merge = [](auto& mine, const auto& theirs, auto pick) {
      if (theirs) mine = mine ? pick(*mine, *theirs) : *theirs;
    };
    const auto lower = [](uint32_t a, uint32_t b) { return std::min(a, b); };
    const auto lower_priority = [](protocol::Priority a, protocol::Priority b) {
      return static_cast<int>(a) <= static_cast<int>(b) ? a : b;
    };
    merge(strictest.sm, limits.sm, lower);
    merge(strictest.max_sm, limits.max_sm, lower);
    merge(strictest.weight, limits.weight, lower);
    merge(strictest.max_weight, limits.max_weight, lower);
    merge(strictest.priority, limits.priority, lower_priority);
    merge(strictest.max_priority, limits.max_priority, lower_priority);
  }
  return strictest;
}

void note(std::string& notice, const std::string& item) {
  notice += notice.empty() ? "" : ", ";
  notice += item;
}

ComputeShare clamp(const EffectiveLimits& limits, const ComputeShare& asked, std::string* notice) {
  ComputeShare granted = asked;
  if (asked.sm_percent == 0) {
    // No cap asked for: the default, else the maximum (a maximum binds).
    if (limits.sm) {
      granted.sm_percent = *limits.sm;
    } else if (limits.max_sm && *limits.max_sm < 100) {
      granted.sm_percent = *limits.max_sm;
    }
  } else if (limits.max_sm && asked.sm_percent > *limits.max_sm) {
    granted.sm_percent = *limits.max_sm;
    if (notice)
      note(*notice, "--sm " + std::to_string(asked.sm_percent) + " to " +
                        std::to_string(granted.sm_percent));
  }

  if (asked.weight == 1) {
    granted.weight = limits.weight.value_or(1);
  } else if (limits.max_weight && asked.weight > *limits.max_weight) {
    granted.weight = *limits.max_weight;
    if (notice)
      note(*notice,
           "--weight " + std::to_string(asked.weight) + " to " + std::to_string(granted.weight));
  }
  if (limits.max_weight) granted.weight = std::min(granted.weight, *limits.max_weight);

  const auto rank = [](protocol::Priority p) { return static_cast<int>(p); };
  if (asked.priority == protocol::Priority::kNormal) {
    granted.priority = limits.priority.value_or(protocol::Priority::kNormal);
  } else if (limits.max_priority && rank(asked.priority) > rank(*limits.max_priority)) {
    granted.priority = *limits.max_priority;
    if (notice)
      note(*notice, "--priority " + std::string(protocol::priority_name(asked.priority)) + " to " +
                        std::string(protocol::priority_name(granted.priority)));
  }
  if (limits.max_priority && rank(granted.priority) > rank(*limits.max_priority))
    granted.priority = *limits.max_priority;
  return granted;
}

std::string device_list(const std::vector<GpuUuid>& uuids) {
  if (uuids.empty()) return "none";
  std::string text;
  for (const GpuUuid& uuid : uuids)
    text += (text.empty() ? "" : ", ") + format_gpu_uuid(uuid);
  return text;
}

}  // namespace

std::string format_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"T", "G", "M", "K"};
  for (int i = 0; i < 4; ++i) {
    const unsigned shift = static_cast<unsigned>(40 - 10 * i);
    if (bytes != 0 && bytes % (uint64_t{1} << shift) == 0)
      return std::to_string(bytes >> shift) + kUnits[i];
  }
  return std::to_string(bytes);
}

ComputeShare clamp_share(const Policy* policy, const PeerIdentity& who, const ComputeShare& asked,
                         const std::vector<GpuUuid>& uuids) {
  if (!policy) return asked;
  return clamp(compute_limits(*policy, who, uuids), asked, nullptr);
}

Result<Grant> clamp_to_policy(const Policy* policy, const PeerIdentity& who,
                              const ComputeShare& share,
                              const std::vector<DeviceMemoryRequest>& devices) {
  Grant grant;
  grant.share = share;
  for (const DeviceMemoryRequest& device : devices)
    grant.memory_cap.push_back(device.requested);
  if (!policy) return grant;

  std::vector<GpuUuid> uuids;
  for (const DeviceMemoryRequest& device : devices) {
    if (!policy->may_use(who, device.uuid)) {
      return fail(
          "the policy (" + policy->path + ") lets uid " + std::to_string(who.uid) + " use " +
          device_list(policy->allowed_devices(who).value_or(std::vector<GpuUuid>{})) + ", not " +
          format_gpu_uuid(device.uuid) + "; set CUDA_VISIBLE_DEVICES to the devices allowed");
    }
    uuids.push_back(device.uuid);
  }

  std::string notice;
  grant.share = clamp(compute_limits(*policy, who, uuids), share, &notice);

  // Memory, device by device; one item when every device was lowered alike.
  std::vector<std::string> lowered;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceMemoryRequest& device = devices[i];
    const EffectiveLimits limits = policy->limits_for(who, &device.uuid, device.total);
    uint64_t& cap = grant.memory_cap[i];
    if (device.requested == 0) {
      cap = limits.memory.value_or(limits.max_memory.value_or(0));
    } else if (limits.max_memory && device.requested > *limits.max_memory) {
      cap = *limits.max_memory;
      lowered.push_back("--mem " + format_size(device.requested) + " to " + format_size(cap));
      lowered.back() += "@" + format_gpu_uuid(device.uuid);
    }
  }
  bool alike = true;
  for (const std::string& item : lowered)
    alike = alike &&
            item.substr(0, item.find('@')) == lowered.front().substr(0, lowered.front().find('@'));
  if (alike && !lowered.empty()) {
    note(notice, lowered.front().substr(0, lowered.front().find('@')));
  } else {
    for (std::string item : lowered)
      note(notice, item.replace(item.find('@'), 1, " on "));
  }
  if (!notice.empty()) grant.notice = "the policy lowers " + notice;
  return grant;
}

ShareBranch share_branch(const Policy* policy, uid_t uid, gid_t gid) {
  ShareBranch branch;
  branch.group = gid;
  branch.user = uid;
  if (!policy) return branch;
  const uint32_t fallback = policy->defaults.share.value_or(1);
  const auto group = policy->groups.find(gid);
  branch.group_share =
      group != policy->groups.end() && group->second.share ? *group->second.share : fallback;
  const auto user = policy->users.find(uid);
  branch.user_share =
      user != policy->users.end() && user->second.share ? *user->second.share : fallback;
  return branch;
}

}  // namespace gpulimit::server
