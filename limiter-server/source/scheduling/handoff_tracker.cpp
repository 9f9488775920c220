#include "gpulimit/server/scheduling/handoff_tracker.h"

#include <algorithm>

namespace gpulimit::server {

bool HandoffTracker::current(const Handshake& handshake, TenantNumber tenant,
                             uint32_t grant) const {
  return handshake.holder != kNoTenant && handshake.holder == tenant && handshake.grant == grant;
}

void HandoffTracker::granted(DeviceIndex device, TenantNumber tenant, uint32_t grant) {
  devices_.at(device) = Handshake{tenant, grant, false, {}, {}};
}

HandoffTracker::Verdict HandoffTracker::revoked(DeviceIndex device,
                                                const std::vector<ConnectionId>& owing) {
  Handshake& handshake = devices_.at(device);
  handshake.revoked = true;
  handshake.owing = std::set<ConnectionId>(owing.begin(), owing.end());
  return handshake.owing.empty() ? Verdict::kComplete : Verdict::kNoted;
}

void HandoffTracker::released(DeviceIndex device) {
  devices_.at(device) = Handshake{};
}

HandoffTracker::Verdict HandoffTracker::ack(DeviceIndex device, TenantNumber tenant,
                                            ConnectionId connection, uint32_t grant) {
  Handshake& handshake = devices_.at(device);
  if (!current(handshake, tenant, grant) || !handshake.revoked) return Verdict::kStale;
  // A process that joined after the revoke owed nothing; its Ack is harmless.
  if (handshake.owing.erase(connection) == 0) return Verdict::kNoted;
  return handshake.owing.empty() ? Verdict::kComplete : Verdict::kNoted;
}

HandoffTracker::Verdict HandoffTracker::idle(DeviceIndex device, TenantNumber tenant,
                                             ConnectionId connection, uint32_t grant,
                                             const std::vector<ConnectionId>& seeing) {
  Handshake& handshake = devices_.at(device);
  if (!current(handshake, tenant, grant)) return Verdict::kStale;
  if (handshake.revoked) return Verdict::kNoted;  // being handed over already
  handshake.idle.insert(connection);
  const bool all_idle = std::all_of(seeing.begin(), seeing.end(), [&](ConnectionId process) {
    return handshake.idle.contains(process);
  });
  return all_idle ? Verdict::kComplete : Verdict::kNoted;
}

bool HandoffTracker::process_left(DeviceIndex device, ConnectionId connection) {
  Handshake& handshake = devices_.at(device);
  handshake.idle.erase(connection);
  return handshake.revoked && handshake.owing.erase(connection) == 1 && handshake.owing.empty();
}

bool HandoffTracker::all_idle(DeviceIndex device, const std::vector<ConnectionId>& seeing) const {
  const Handshake& handshake = devices_.at(device);
  if (handshake.holder == kNoTenant || handshake.revoked || handshake.idle.empty()) return false;
  return std::all_of(seeing.begin(), seeing.end(),
                     [&](ConnectionId process) { return handshake.idle.contains(process); });
}

std::vector<ConnectionId> HandoffTracker::owing(DeviceIndex device) const {
  const Handshake& handshake = devices_.at(device);
  return {handshake.owing.begin(), handshake.owing.end()};
}

}  // namespace gpulimit::server
