#include "gpulimit/server/limits_policy.h"

namespace gpulimit::server {

Result<ComputeShare> clamp_to_policy(const ComputeShare& requested,
                                     const protocol::PeerCredentials& /*peer*/) {
  // No policy file yet: granted as asked.
  return requested;
}

}  // namespace gpulimit::server
