#include "gpulimit/server/quota/lease_book.h"

#include <algorithm>

namespace gpulimit::server {
namespace {

uint64_t round_up(uint64_t bytes, uint64_t step) {
  const uint64_t steps = bytes / step + (bytes % step != 0);
  return steps > kUnlimitedLease / step ? kUnlimitedLease : steps * step;
}

uint64_t promise_on(const std::map<DeviceIndex, uint64_t>& promised, DeviceIndex device) {
  const auto found = promised.find(device);
  return found == promised.end() ? 0 : found->second;
}

}  // namespace

LeaseBook::LeaseBook(uint64_t chunk_bytes) : chunk_(std::max<uint64_t>(1, chunk_bytes)) {}

void LeaseBook::set_group_total(uint32_t group, DeviceIndex device, std::optional<uint64_t> bytes) {
  set_total({Scope::kGroup, group, device}, bytes);
}

void LeaseBook::set_user_total(uint32_t user, DeviceIndex device, std::optional<uint64_t> bytes) {
  set_total({Scope::kUser, user, device}, bytes);
}

void LeaseBook::set_total(const TotalKey& key, std::optional<uint64_t> bytes) {
  if (bytes) {
    totals_[key] = *bytes;
  } else {
    totals_.erase(key);
  }
}

void LeaseBook::add_tenant(TenantNumber tenant, uint32_t group, uint32_t user) {
  members_.try_emplace(tenant, Member{group, user, {}});
}

void LeaseBook::adopt(TenantNumber tenant, DeviceIndex device, uint64_t bytes) {
  const auto found = members_.find(tenant);
  if (found == members_.end() || !bound(found->second, device) || bytes == 0) return;
  uint64_t& promised = found->second.promised[device];
  promised = std::max(promised, bytes);
}

void LeaseBook::remove_tenant(TenantNumber tenant) {
  members_.erase(tenant);
}

std::optional<uint64_t> LeaseBook::total(const TotalKey& key) const {
  const auto found = totals_.find(key);
  if (found == totals_.end()) return std::nullopt;
  return found->second;
}

std::vector<LeaseBook::TotalKey> LeaseBook::totals_of(const Member& member,
                                                      DeviceIndex device) const {
  std::vector<TotalKey> keys;
  for (const DeviceIndex scope_device : {device, kAllDevices})
    for (const TotalKey& key : {TotalKey{Scope::kGroup, member.group, scope_device},
                                TotalKey{Scope::kUser, member.user, scope_device}})
      if (total(key)) keys.push_back(key);
  return keys;
}

bool LeaseBook::bound(const Member& member, DeviceIndex device) const {
  return !totals_of(member, device).empty();
}

uint64_t LeaseBook::promised_under(const TotalKey& key) const {
  const auto& [scope, id, device] = key;
  uint64_t sum = 0;
  for (const auto& [tenant, member] : members_) {
    if ((scope == Scope::kGroup ? member.group : member.user) != id) continue;
    if (device != kAllDevices) {
      sum += promise_on(member.promised, device);
    } else {
      for (const auto& [any_device, bytes] : member.promised)
        sum += bytes;
    }
  }
  return sum;
}

uint64_t LeaseBook::ceiling(const Member& member, DeviceIndex device) const {
  const uint64_t own = promise_on(member.promised, device);
  uint64_t most = kUnlimitedLease;
  for (const TotalKey& key : totals_of(member, device)) {
    const uint64_t bytes = *total(key);
    const uint64_t others = promised_under(key) - own;
    most = std::min(most, bytes > others ? bytes - others : 0);
  }
  return most;
}

void LeaseBook::shrink(TenantNumber other, Member& member, DeviceIndex device,
                       const ReadUsed& read_used, const WriteLease& write_lease) {
  const uint64_t old = promise_on(member.promised, device);
  const uint64_t used = read_used(other, device);  // S1
  if (used >= old) return;
  write_lease(other, device, used);  // S2
  // S3: a reservation whose CAS came between S1 and S2 may commit under the
  // old lease, so it counts; one about to be undone may be counted too, so
  // the promise never grows past the old one.
  const uint64_t again = read_used(other, device);
  member.promised[device] = std::min(old, std::max(used, again));
}

std::optional<uint64_t> LeaseBook::request(TenantNumber tenant, DeviceIndex device, uint64_t need,
                                           const ReadUsed& read_used,
                                           const WriteLease& write_lease) {
  const auto found = members_.find(tenant);
  if (found == members_.end()) return std::nullopt;
  Member& member = found->second;
  if (!bound(member, device)) {
    write_lease(tenant, device, kUnlimitedLease);
    return kUnlimitedLease;
  }
  // G1: promised already (a shrink counted a reservation it then undid).
  if (const uint64_t own = promise_on(member.promised, device); own >= need) {
    write_lease(tenant, device, own);
    return own;
  }
  // G2: no room: take back what the others under the same totals do not
  // use: on this device, and under a total of all devices on every one.
  if (ceiling(member, device) < need) {
    const std::vector<TotalKey> mine = totals_of(member, device);
    std::vector<std::pair<TenantNumber, DeviceIndex>> others;
    for (const auto& [other, other_member] : members_) {
      if (other == tenant) continue;
      for (const auto& [other_device, bytes] : other_member.promised) {
        if (bytes == 0) continue;
        const std::vector<TotalKey> theirs = totals_of(other_member, other_device);
        const auto shared = [&](const TotalKey& key) {
          return (std::get<2>(key) == kAllDevices || other_device == device) &&
                 std::find(theirs.begin(), theirs.end(), key) != theirs.end();
        };
        if (std::any_of(mine.begin(), mine.end(), shared)) others.emplace_back(other, other_device);
      }
    }
    for (const auto& [other, other_device] : others)
      shrink(other, members_.at(other), other_device, read_used, write_lease);
  }
  // G3: a chunk's worth where there is room, at least what it needs; G4: none.
  const uint64_t room = ceiling(member, device);
  if (room < need) return std::nullopt;
  const uint64_t lease = std::min(room, round_up(need, chunk_));
  member.promised[device] = lease;
  write_lease(tenant, device, lease);
  return lease;
}

uint64_t LeaseBook::promised(TenantNumber tenant, DeviceIndex device) const {
  const auto found = members_.find(tenant);
  if (found == members_.end()) return 0;
  if (!bound(found->second, device)) return kUnlimitedLease;
  return promise_on(found->second.promised, device);
}

uint64_t LeaseBook::group_promised(uint32_t group, DeviceIndex device) const {
  return promised_under({Scope::kGroup, group, device});
}

uint64_t LeaseBook::user_promised(uint32_t user, DeviceIndex device) const {
  return promised_under({Scope::kUser, user, device});
}

}  // namespace gpulimit::server
