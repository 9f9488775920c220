// The one place where what a tenant asks for becomes what it gets.
//
// This is the seam for the policy file of system mode (per-user and
// per-group maxima of --sm, --weight and --priority, checked against the
// kernel's uid and gid, never against what a client says). Until that file
// exists every request is granted as asked; callers already treat the
// answer as final and may be refused.
#pragma once

#include "gpulimit/protocol/channel.h"
#include "gpulimit/server/result.h"
#include "gpulimit/server/scheduling_types.h"

namespace gpulimit::server {

// The share `peer` may have when it asks for `requested`: the same, lowered,
// or a refusal saying why in one line.
Result<ComputeShare> clamp_to_policy(const ComputeShare& requested,
                                     const protocol::PeerCredentials& peer);

}  // namespace gpulimit::server
