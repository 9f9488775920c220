// The descriptor limit and each user's share of it.
#include "gpulimit/server/loop/connection_limits.h"

#include <sys/resource.h>

#include <algorithm>

namespace gpulimit::server {

uint64_t raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(limit.rlim_cur);
}

uint32_t connections_per_uid(uint32_t configured, uint64_t descriptor_limit) {
  const uint64_t for_connections =
      descriptor_limit > kReservedDescriptors ? (descriptor_limit - kReservedDescriptors) / 2 : 0;
  const uint64_t share = for_connections / kUidShareOfDescriptors;
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(configured, share)));
}

bool UidConnectionCounts::admit(uid_t uid) {
  uint32_t& held = held_[uid];
  if (held >= limit_) return false;
  ++held;
  return true;
}

void UidConnectionCounts::release(uid_t uid) {
  const auto found = held_.find(uid);
  if (found == held_.end()) return;
  if (--found->second == 0) held_.erase(found);
}

uint32_t UidConnectionCounts::held(uid_t uid) const {
  const auto found = held_.find(uid);
  return found == held_.end() ? 0 : found->second;
}

}  // namespace gpulimit::server
