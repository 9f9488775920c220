#include "gpulimit/server/quota/memory_totals.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "gpulimit/server/policy/limits_policy.h"
#include "gpulimit/server/policy/user_accounts.h"
#include "gpulimit/shm/ledger_inspection.h"

namespace gpulimit::server {
namespace {

// read_used's answer for a ledger it cannot read.
constexpr uint64_t kUnknownUse = UINT64_MAX;

}  // namespace

static_assert(kUnlimitedLease == shm::kNoLeaseLimit, "the book and the page mean the same");

MemoryTotals::MemoryTotals() : book_(kLeaseStep) {}

namespace {

// The totals the policy gives a tenant of `uid` in group `gid` on the device
// `uuid`: its group's and its user's there, and of all devices.
struct TotalsOf {
  std::optional<uint64_t> group, user, group_all, user_all;

  bool any() const { return group || user || group_all || user_all; }
  std::optional<uint64_t> smallest() const {
    std::optional<uint64_t> least;
    for (const std::optional<uint64_t> bytes : {group, user, group_all, user_all})
      if (bytes) least = std::min(least.value_or(*bytes), *bytes);
    return least;
  }
};

TotalsOf totals_of(const Policy* policy, uid_t uid, gid_t gid, const GpuUuid& uuid) {
  if (!policy) return {};
  return {policy->group_memory_total(gid, uuid), policy->user_memory_total(uid, uuid),
          policy->group_memory_total_all(gid), policy->user_memory_total_all(uid)};
}

}  // namespace

std::array<MemoryTotals::TotalKey, 4> MemoryTotals::keys_of(const Member& member,
                                                            DeviceIndex device) {
  return {TotalKey{true, member.gid, device}, TotalKey{false, member.uid, device},
          TotalKey{true, member.gid, kAllDevices}, TotalKey{false, member.uid, kAllDevices}};
}

void MemoryTotals::set_totals(const Member& member, DeviceIndex device, const GpuUuid& uuid,
                              const Policy* policy) {
  const TotalsOf totals = totals_of(policy, member.uid, member.gid, uuid);
  book_.set_group_total(member.gid, device, totals.group);
  book_.set_user_total(member.uid, device, totals.user);
  book_.set_group_total(member.gid, kAllDevices, totals.group_all);
  book_.set_user_total(member.uid, kAllDevices, totals.user_all);
  const std::array<TotalKey, 4> keys = keys_of(member, device);
  const std::array<std::optional<uint64_t>, 4> bytes = {totals.group, totals.user, totals.group_all,
                                                        totals.user_all};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (bytes[i]) {
      totals_[keys[i]] = *bytes[i];
    } else {
      totals_.erase(keys[i]);
    }
  }
}

std::optional<MemoryTotals::Joined> MemoryTotals::process_joined(
    TenantNumber tenant, bool new_tenant, uid_t uid, gid_t gid, const std::string& ledger_path,
    const std::vector<DeviceSeen>& devices, const Policy* policy, std::string& error) {
  Joined joined;
  joined.bound.resize(devices.size());
  auto found = members_.find(tenant);
  if (found == members_.end()) {
    if (!new_tenant) return joined;  // it joined unbound: it stays so
    const auto binds = [&](const DeviceSeen& seen) {
      return totals_of(policy, uid, gid, seen.uuid).any();
    };
    if (!std::any_of(devices.begin(), devices.end(), binds)) return joined;
    std::unique_ptr<shm::LeasePage> page = shm::LeasePage::create(tenant, error);
    if (!page) return std::nullopt;
    Member member;
    member.uid = uid;
    member.gid = gid;
    member.ledger_path = ledger_path;
    member.page = std::move(page);
    found = members_.emplace(tenant, std::move(member)).first;
    book_.add_tenant(tenant, gid, uid);
  }
  Member& member = found->second;
  ++member.processes;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceSeen& seen = devices[i];
    const bool new_device = member.devices.emplace(seen.device, seen.uuid).second;
    set_totals(member, seen.device, seen.uuid, policy);
    // What its ledger holds already (a server started anew while the
    // tenant ran, a ledger its processes share with an earlier tenant) is
    // promised to it before anything is granted to others.
    if (new_device && book_.promised(tenant, seen.device) == 0)
      if (const uint64_t held = read_used(tenant, seen.device); held != kUnknownUse)
        book_.adopt(tenant, seen.device, held);
    const uint64_t promised = book_.promised(tenant, seen.device);
    member.page->set_lease(seen.device, promised);
    if (promised == kUnlimitedLease) continue;
    joined.leased |= 1u << i;
    joined.bound[i] = totals_of(policy, uid, gid, seen.uuid).smallest();
  }
  joined.page = member.page.get();
  refresh_rooms();
  return joined;
}

void MemoryTotals::process_exited(TenantNumber tenant) {
  const auto found = members_.find(tenant);
  if (found == members_.end() || --found->second.processes > 0) return;
  book_.remove_tenant(tenant);
  members_.erase(found);
  refresh_rooms();
}

uint64_t MemoryTotals::read_used(TenantNumber tenant, DeviceIndex device) const {
  // What cannot be read counts as all of the promise (kUnknownUse, the
  // largest value): a shrink then takes nothing back.
  const auto found = members_.find(tenant);
  if (found == members_.end()) return kUnknownUse;
  const Member& member = found->second;
  const auto uuid = member.devices.find(device);
  if (uuid == member.devices.end()) return kUnknownUse;
  // No ledger: the tenant has reserved nothing (its processes make the
  // ledger before their first reservation), or it removed its own, which
  // lets it keep what it holds but no lease it does not use.
  struct stat status {};
  if (::lstat(member.ledger_path.c_str(), &status) != 0 && errno == ENOENT) return 0;
  std::vector<shm::LedgerDeviceUsage> usage;
  std::string error;
  if (!shm::read_ledger_usage(member.ledger_path, member.uid, usage, error)) return kUnknownUse;
  for (const shm::LedgerDeviceUsage& entry : usage)
    if (std::memcmp(entry.uuid.data(), uuid->second.data(), entry.uuid.size()) == 0)
      return entry.used;
  return 0;  // the tenant has not registered the device: it holds nothing there
}

void MemoryTotals::write_lease(TenantNumber tenant, DeviceIndex device, uint64_t bytes) {
  if (const auto found = members_.find(tenant); found != members_.end())
    found->second.page->set_lease(device, bytes);
}

std::optional<uint64_t> MemoryTotals::request(TenantNumber tenant, DeviceIndex device,
                                              uint64_t need) {
  const auto found = members_.find(tenant);
  if (found == members_.end()) return std::nullopt;
  const std::optional<uint64_t> granted = book_.request(
      tenant, device, need,
      [this](TenantNumber other, DeviceIndex d) { return read_used(other, d); },
      [this](TenantNumber other, DeviceIndex d, uint64_t bytes) { write_lease(other, d, bytes); });
  refresh_rooms();  // before the answer, so that the asker sees it
  found->second.page->answer(device);
  return granted;
}

void MemoryTotals::refresh_rooms() {
  // What each tenant holds, read once; an unreadable ledger counts as all
  // of its promise.
  std::map<std::pair<TenantNumber, DeviceIndex>, uint64_t> held;
  for (const auto& [tenant, member] : members_)
    for (const auto& [device, uuid] : member.devices) {
      uint64_t bytes = read_used(tenant, device);
      if (bytes == kUnknownUse) {
        const uint64_t promised = book_.promised(tenant, device);
        bytes = promised == kUnlimitedLease ? 0 : promised;
      }
      held[{tenant, device}] = bytes;
    }
  for (auto& [tenant, member] : members_)
    for (const auto& [device, uuid] : member.devices) {
      uint64_t room = shm::kNoLeaseLimit;
      for (const TotalKey& key : keys_of(member, device)) {
        const auto& [is_group, id, on] = key;
        const auto total = totals_.find(key);
        if (total == totals_.end()) continue;
        uint64_t others = 0;
        for (const auto& [holder, bytes] : held) {
          const auto& [other, other_device] = holder;
          const Member& them = members_.at(other);
          if (other == tenant || (is_group ? them.gid : them.uid) != id) continue;
          if (on == kAllDevices || other_device == device) others += bytes;
        }
        room = std::min(room, total->second > others ? total->second - others : 0);
      }
      member.page->set_room(device, room);
    }
}

std::vector<std::string> MemoryTotals::apply_policy(const Policy* policy) {
  const auto before = totals_;
  totals_.clear();
  for (auto& [tenant, member] : members_)
    for (const auto& [device, uuid] : member.devices) {
      set_totals(member, device, uuid, policy);
      // A device no total binds any more: the lease goes with it.
      if (book_.promised(tenant, device) == kUnlimitedLease)
        member.page->set_lease(device, shm::kNoLeaseLimit);
    }
  std::vector<std::string> changes;
  const auto name = [](bool group, uint32_t id, DeviceIndex device) {
    return std::string(device == kAllDevices ? "memory_total_all of " : "memory_total of ") +
           (group ? "group " : "user ") + (group ? group_name(id) : user_name(id)) +
           (device == kAllDevices ? "" : " on device " + std::to_string(device));
  };
  for (const auto& [key, bytes] : totals_) {
    const auto& [group, id, device] = key;
    const auto old = before.find(key);
    if (old == before.end()) {
      changes.push_back(name(group, id, device) + " is now " + format_size(bytes) +
                        " (binding the tenants that join from now on, and running ones where "
                        "another total bound them when they joined)");
    } else if (old->second != bytes) {
      changes.push_back(name(group, id, device) + ": " + format_size(old->second) + " -> " +
                        format_size(bytes));
    }
  }
  for (const auto& [key, bytes] : before)
    if (!totals_.contains(key)) {
      const auto& [group, id, device] = key;
      changes.push_back(name(group, id, device) + " (" + format_size(bytes) + ") removed");
    }
  return changes;
}

std::vector<MemoryTotals::TotalState> MemoryTotals::report() const {
  std::vector<TotalState> states;
  for (const auto& [key, bytes] : totals_) {
    const auto& [group, id, device] = key;
    TotalState state;
    state.group = group;
    state.id = id;
    state.device = device;
    state.total = bytes;
    state.promised = group ? book_.group_promised(id, device) : book_.user_promised(id, device);
    for (const auto& [tenant, member] : members_) {
      if ((group ? member.gid : member.uid) != id) continue;
      if (device != kAllDevices && !member.devices.contains(device)) continue;
      ++state.tenants;
      for (const auto& [own_device, uuid] : member.devices) {
        if (device != kAllDevices && own_device != device) continue;
        const uint64_t used = read_used(tenant, own_device);
        if (used != kUnknownUse) state.used += used;
      }
    }
    if (state.tenants > 0) states.push_back(state);
  }
  return states;
}

}  // namespace gpulimit::server
