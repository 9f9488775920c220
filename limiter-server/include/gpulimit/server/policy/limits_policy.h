// The one place where what a tenant asks for becomes what it gets, under
// the administrator's policy (policy.h), checked against the kernel's uid
// and gid, never against what a client says.
//
//   - Asked for nothing (no --mem, no --sm, --weight 1, --priority normal):
//     the policy's default, else no limit. Memory with only a maximum gets
//     the maximum: a maximum binds whoever asks nothing too.
//   - Asked for more than the maximum: the maximum, and one line for the
//     user (`notice`) naming what was lowered.
//   - A device the user may not use: refused, with a line naming it.
// Without a policy every request is granted as asked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpulimit/server/policy/policy.h"
#include "gpulimit/server/result.h"
#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

// One device a process sees, as its Hello names it.
struct DeviceMemoryRequest {
  GpuUuid uuid{};
  uint64_t requested = 0;  // bytes the process asks as its cap there; 0: none
  uint64_t total = 0;      // the device's size as the process's driver reports it; 0: unknown
};

struct Grant {
  ComputeShare share;
  std::vector<uint64_t> memory_cap;  // per requested device, in order; 0: none
  std::string notice;                // what was lowered, in one line; empty if nothing
};

// What `who` gets for `share` and `devices`; `policy` may be null (none).
Result<Grant> clamp_to_policy(const Policy* policy, const PeerIdentity& who,
                              const ComputeShare& share,
                              const std::vector<DeviceMemoryRequest>& devices);

// The share only, for a tenant already running when a policy is reloaded:
// the same as clamp_to_policy's, for the devices `uuids`.
ComputeShare clamp_share(const Policy* policy, const PeerIdentity& who, const ComputeShare& asked,
                         const std::vector<GpuUuid>& uuids);

// The tenant's place in the fair-share tree (scheduling_types.h): its group
// is `gid`, the group its first process runs as (from the kernel; a user
// picks one of their groups with sg or newgrp), with that group's `share`;
// its user is `uid`, with the user's `share`. A share no entry of its own
// sets is [defaults]' share, else 1. Without a policy every share is 1.
ShareBranch share_branch(const Policy* policy, uid_t uid, gid_t gid);

// "12G", "512M" or bytes: how a cap is shown to the user.
std::string format_size(uint64_t bytes);

}  // namespace gpulimit::server
