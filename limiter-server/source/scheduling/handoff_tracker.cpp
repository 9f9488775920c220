#include "gpulimit/server/scheduling/handoff_tracker.h"

#include <algorithm>

namespace gpulimit::server {

bool HandoffTracker::current(const Handshake& handshake, TenantNumber tenant,
                             uint32_t grant) const {
  return handshake.holder != kNoTenant && handshake.holder == tenant && handshake.grant == grant;
}

void HandoffTracker::granted(DeviceIndex device, TenantNumber tenant, uint32_t grant) {
  devices_.at(device) = Handshake{tenant, grant, false, {}, {}};
  // The scheduler settles a forced tenant's overrun at its next grant: what
  // it still owes from before counts no more.
  std::erase_if(late_.at(device), [&](const LateDrain& drain) { return drain.tenant == tenant; });
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

void HandoffTracker::forced(DeviceIndex device) {
  Handshake& handshake = devices_.at(device);
  if (handshake.holder != kNoTenant && handshake.revoked && !handshake.owing.empty()) {
    // None of the tenant's is kept: its grant removed it.
    std::vector<LateDrain>& late = late_.at(device);
    if (late.size() == kMaxLateDrains) late.erase(late.begin());
    LateDrain& entry = late.emplace_back(LateDrain{handshake.holder, {}});
    for (const ConnectionId connection : handshake.owing)
      entry.owing.emplace(connection, handshake.grant);
  }
  handshake = Handshake{};
}

HandoffTracker::Verdict HandoffTracker::ack(DeviceIndex device, TenantNumber tenant,
                                            ConnectionId connection, uint32_t grant) {
  Handshake& handshake = devices_.at(device);
  if (!current(handshake, tenant, grant) || !handshake.revoked) {
    // Late, after an ack timeout: the drain a forced tenant owed.
    std::vector<LateDrain>& late = late_.at(device);
    const auto entry = std::find_if(late.begin(), late.end(),
                                    [&](const LateDrain& drain) { return drain.tenant == tenant; });
    if (entry == late.end() || entry->owing.erase({connection, grant}) == 0) return Verdict::kStale;
    if (!entry->owing.empty()) return Verdict::kNoted;
    late.erase(entry);
    return Verdict::kLateDrained;
  }
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

HandoffTracker::Left HandoffTracker::process_left(DeviceIndex device, ConnectionId connection) {
  Left left;
  Handshake& handshake = devices_.at(device);
  handshake.idle.erase(connection);
  left.drained =
      handshake.revoked && handshake.owing.erase(connection) == 1 && handshake.owing.empty();
  // A process is one tenant's: at most one late drain is its.
  std::vector<LateDrain>& late = late_.at(device);
  for (auto entry = late.begin(); entry != late.end(); ++entry) {
    const auto owed = [&](const auto& pair) { return pair.first == connection; };
    if (std::erase_if(entry->owing, owed) == 0) continue;
    if (entry->owing.empty()) {
      left.late_drained = true;
      late.erase(entry);
    }
    break;
  }
  return left;
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
