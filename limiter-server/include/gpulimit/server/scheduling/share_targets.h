// What share of a device each tenant should get under the current demand:
// the scheduling rules' target, shown by `gpulimit status` beside the share
// achieved.
#pragma once

#include <vector>

#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

struct ShareDemand {
  TenantNumber tenant = kNoTenant;
  ComputeShare share;
  ShareBranch branch;
  // The usage history's fair-share factors of its group and its user
  // (token_scheduler.h); 1 without history.
  double group_factor = 1;
  double user_factor = 1;
};

struct ShareTarget {
  TenantNumber tenant = kNoTenant;
  double fraction = 0;  // of the device's time, 0 to 1
};

// Strict priority, then the fair-share tree: the high-priority tenants
// split the device, what they leave (their hard caps) goes to the normal
// ones, and what those leave to the low ones. Within a class the time is
// split between groups by group share, within a group between users by user
// share, within a user between tenants by weight. A tenant never gets more
// than its hard cap, nor a user or group more than its tenants' caps add up
// to; what a cap leaves goes to the others at the same level (water
// filling). A group's and a user's share count times their fair-share
// factor. Targets come back in the order of `demands`.
std::vector<ShareTarget> share_targets(const std::vector<ShareDemand>& demands);

}  // namespace gpulimit::server
