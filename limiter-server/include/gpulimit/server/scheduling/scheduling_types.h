// The words the scheduler, the registry and the event loop share.
#pragma once

#include <cstdint>
#include <limits>

#include "gpulimit/protocol/messages.h"

namespace gpulimit::server {

// The server's number for a tenant: t of the board's token words
// (gpulimit/shm/board.h). 0 means nobody.
using TenantNumber = uint32_t;
inline constexpr TenantNumber kNoTenant = 0;

// A device's index in the board (BoardLayout::devices).
using DeviceIndex = uint32_t;

// Nanoseconds of a steady clock (CLOCK_MONOTONIC); only differences matter.
using TimeNs = int64_t;
inline constexpr TimeNs kNever = std::numeric_limits<TimeNs>::max();
inline constexpr TimeNs kNsPerMs = 1'000'000;

// What a tenant is granted of GPU time, after policy (limits_policy.h).
struct ComputeShare {
  uint32_t sm_percent = 0;  // hard cap, % of GPU time; 0 (and 100): none
  uint32_t weight = 1;      // share under contention, 1 to protocol::kMaxWeight
  protocol::Priority priority = protocol::Priority::kNormal;

  friend bool operator==(const ComputeShare&, const ComputeShare&) = default;
};

inline bool has_hard_cap(const ComputeShare& share) {
  return share.sm_percent > 0 && share.sm_percent < 100;
}

// Where a tenant sits in the fair-share tree, after policy: under
// contention a device's time is split between the groups that want it by
// their shares, within a group between its users by theirs, and within a
// user between the user's tenants by weight. A user's tenants under two
// groups are two branches, each counted in its own group.
struct ShareBranch {
  uint32_t group = 0;        // the gid the tenant's first process ran as
  uint32_t user = 0;         // its uid
  uint32_t group_share = 1;  // 1 to protocol::kMaxWeight
  uint32_t user_share = 1;   // within the group, 1 to protocol::kMaxWeight

  friend bool operator==(const ShareBranch&, const ShareBranch&) = default;
};

}  // namespace gpulimit::server
