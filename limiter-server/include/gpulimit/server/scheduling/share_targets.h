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
};

struct ShareTarget {
  TenantNumber tenant = kNoTenant;
  double fraction = 0;  // of the device's time, 0 to 1
};

// Strict priority, then weights: the high-priority tenants split the device
// by weight, what they leave (their hard caps) goes to the normal ones, and
// what those leave to the low ones. A tenant never gets more than its hard
// cap; what a cap leaves goes to the others of its class by weight (water
// filling). Targets come back in the order of `demands`.
std::vector<ShareTarget> share_targets(const std::vector<ShareDemand>& demands);

}  // namespace gpulimit::server
