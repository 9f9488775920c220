#include "gpulimit/server/policy/policy.h"

#include <grp.h>
#include <pwd.h>

#include <algorithm>

#include "gpulimit/options/values.h"

namespace gpulimit::server {
namespace {

int rank(protocol::Priority priority) {
  return static_cast<int>(priority);
}

int rank(UnmanagedAction action) {
  return static_cast<int>(action);
}

// The stricter of two values of one setting.
template <typename T>
T stricter(const T& a, const T& b) {
  return std::min(a, b);
}
protocol::Priority stricter(protocol::Priority a, protocol::Priority b) {
  return rank(a) <= rank(b) ? a : b;
}

// Bytes of `amount` on a device of `total` bytes; a percentage of a device
// of unknown size is no amount.
std::optional<uint64_t> in_bytes(const std::optional<options::Amount>& amount, uint64_t total) {
  if (!amount) return std::nullopt;
  if (amount->kind == options::Amount::Kind::kPercent && total == 0) return std::nullopt;
  return amount->resolve(total);
}

// One entry's limits on one device: the device's own section first.
EffectiveLimits entry_limits(const PolicyEntry& entry, const GpuUuid* uuid, uint64_t total) {
  const PolicySettings* own = nullptr;
  if (uuid) {
    const auto found = entry.device.find(*uuid);
    if (found != entry.device.end()) own = &found->second;
  }
  const PolicySettings& all = entry.all_devices;
  const auto pick = [own](auto member, const PolicySettings& fallback) {
    return own && (own->*member) ? own->*member : fallback.*member;
  };
  EffectiveLimits limits;
  limits.memory = in_bytes(pick(&PolicySettings::memory, all), total);
  limits.max_memory = in_bytes(pick(&PolicySettings::max_memory, all), total);
  limits.sm = pick(&PolicySettings::sm, all);
  limits.max_sm = pick(&PolicySettings::max_sm, all);
  limits.weight = pick(&PolicySettings::weight, all);
  limits.max_weight = pick(&PolicySettings::max_weight, all);
  limits.priority = pick(&PolicySettings::priority, all);
  limits.max_priority = pick(&PolicySettings::max_priority, all);
  return limits;
}

// Calls `merge(mine, theirs)` for each setting of `into` with the same
// setting of `from`: the one list of EffectiveLimits' fields that the ways
// of combining two entries share.
template <typename Merge>
void each_setting(EffectiveLimits& into, const EffectiveLimits& from, Merge&& merge) {
  merge(into.memory, from.memory);
  merge(into.max_memory, from.max_memory);
  merge(into.sm, from.sm);
  merge(into.max_sm, from.max_sm);
  merge(into.weight, from.weight);
  merge(into.max_weight, from.max_weight);
  merge(into.priority, from.priority);
  merge(into.max_priority, from.max_priority);
}

// Each setting `into` lacks, taken from `from`.
void fill_from(EffectiveLimits& into, const EffectiveLimits& from) {
  each_setting(into, from, [](auto& mine, const auto& theirs) {
    if (!mine) mine = theirs;
  });
}

// Several groups: each setting, the stricter of those that set it.
void tighten(EffectiveLimits& into, const EffectiveLimits& from) {
  each_setting(into, from, [](auto& mine, const auto& theirs) {
    if (!theirs) return;
    mine = mine ? stricter(*mine, *theirs) : *theirs;
  });
}

// The entries of the groups `who` is in, each once.
std::vector<const PolicyEntry*> group_entries(const Policy& policy, const PeerIdentity& who) {
  std::vector<gid_t> groups = who.groups;
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  std::vector<const PolicyEntry*> entries;
  for (const gid_t gid : groups)
    if (const auto found = policy.groups.find(gid); found != policy.groups.end())
      entries.push_back(&found->second);
  return entries;
}

const PolicyEntry* user_entry(const Policy& policy, const PeerIdentity& who) {
  const auto found = policy.users.find(who.uid);
  return found == policy.users.end() ? nullptr : &found->second;
}

}  // namespace

const char* unmanaged_action_name(UnmanagedAction action) {
  switch (action) {
    case UnmanagedAction::kAllow:
      return "allow";
    case UnmanagedAction::kWarn:
      return "warn";
    case UnmanagedAction::kKill:
      return "kill";
  }
  return "allow";
}

const char* orphan_action_name(OrphanAction action) {
  return action == OrphanAction::kKill ? "kill" : "warn";
}

PeerIdentity identify(uid_t uid, gid_t gid) {
  PeerIdentity who{uid, {gid}};
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) != 0 || !found) return who;
  int count = 32;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  if (getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count) < 0) {
    // Too small: `count` now says how many there are.
    groups.resize(static_cast<std::size_t>(count));
    if (getgrouplist(found->pw_name, found->pw_gid, groups.data(), &count) < 0) count = 0;
  }
  groups.resize(static_cast<std::size_t>(std::max(count, 0)));
  who.groups.insert(who.groups.end(), groups.begin(), groups.end());
  return who;
}

EffectiveLimits Policy::limits_for(const PeerIdentity& who, const GpuUuid* uuid,
                                   uint64_t device_total) const {
  EffectiveLimits limits;
  if (const PolicyEntry* user = user_entry(*this, who))
    limits = entry_limits(*user, uuid, device_total);
  EffectiveLimits from_groups;
  for (const PolicyEntry* group : group_entries(*this, who))
    tighten(from_groups, entry_limits(*group, uuid, device_total));
  fill_from(limits, from_groups);
  fill_from(limits, entry_limits(defaults, uuid, device_total));
  // A default never passes the maximum that applies.
  if (limits.memory && limits.max_memory)
    limits.memory = std::min(*limits.memory, *limits.max_memory);
  if (limits.sm && limits.max_sm) limits.sm = std::min(*limits.sm, *limits.max_sm);
  if (limits.weight && limits.max_weight)
    limits.weight = std::min(*limits.weight, *limits.max_weight);
  if (limits.priority && limits.max_priority)
    limits.priority = stricter(*limits.priority, *limits.max_priority);
  return limits;
}

std::optional<std::vector<GpuUuid>> Policy::allowed_devices(const PeerIdentity& who) const {
  if (const PolicyEntry* user = user_entry(*this, who); user && user->allowed_devices)
    return user->allowed_devices;
  std::optional<std::vector<GpuUuid>> allowed;
  for (const PolicyEntry* group : group_entries(*this, who)) {
    if (!group->allowed_devices) continue;
    if (!allowed) {
      allowed = group->allowed_devices;
      continue;
    }
    // Every group that says must allow it.
    std::erase_if(*allowed, [&](const GpuUuid& uuid) {
      return std::find(group->allowed_devices->begin(), group->allowed_devices->end(), uuid) ==
             group->allowed_devices->end();
    });
  }
  if (allowed) return allowed;
  return defaults.allowed_devices;
}

bool Policy::may_use(const PeerIdentity& who, const GpuUuid& uuid) const {
  const std::optional<std::vector<GpuUuid>> allowed = allowed_devices(who);
  return !allowed || std::find(allowed->begin(), allowed->end(), uuid) != allowed->end();
}

UnmanagedAction Policy::unmanaged_action(const PeerIdentity& who, UnmanagedAction otherwise) const {
  if (const PolicyEntry* user = user_entry(*this, who); user && user->unmanaged)
    return *user->unmanaged;
  std::optional<UnmanagedAction> action;
  for (const PolicyEntry* group : group_entries(*this, who))
    if (group->unmanaged && (!action || rank(*group->unmanaged) > rank(*action)))
      action = group->unmanaged;
  if (action) return *action;
  return defaults.unmanaged.value_or(otherwise);
}

UnmanagedAction Policy::unmanaged_action(uid_t uid, gid_t gid, UnmanagedAction otherwise) const {
  return unmanaged_action(identify(uid, gid), otherwise);
}

bool parse_gpu_uuid(const std::string& text, GpuUuid& out) {
  // Exactly GPU-8-4-4-4-12 hex digits here (options' reader also takes MIG-
  // and dashes anywhere, as the environment may write them).
  if (text.size() != 4 + 32 + 4 || !text.starts_with("GPU-")) return false;
  for (const std::size_t dash : {12, 17, 22, 27})
    if (text[dash] != '-') return false;
  return options::parse_device_uuid(text, out);
}

std::string format_gpu_uuid(const GpuUuid& uuid) {
  return options::format_device_uuid(uuid);
}

OrphanRule Policy::orphan_rule(const PeerIdentity& who, const OrphanRule& otherwise) const {
  std::optional<OrphanAction> action;
  std::optional<uint32_t> grace_s;
  if (const PolicyEntry* user = user_entry(*this, who)) {
    action = user->orphans;
    grace_s = user->orphan_grace_s;
  }
  std::optional<OrphanAction> group_action;
  std::optional<uint32_t> group_grace_s;
  for (const PolicyEntry* group : group_entries(*this, who)) {
    if (group->orphans && (!group_action || *group->orphans == OrphanAction::kKill))
      group_action = group->orphans;
    if (group->orphan_grace_s)
      group_grace_s = std::min(group_grace_s.value_or(*group->orphan_grace_s), *group->orphan_grace_s);
  }
  return OrphanRule{action.value_or(group_action.value_or(defaults.orphans.value_or(otherwise.action))),
                    grace_s.value_or(group_grace_s.value_or(
                        defaults.orphan_grace_s.value_or(otherwise.grace_s)))};
}

namespace {

std::optional<uint64_t> entry_total(const PolicyEntry& entry, const GpuUuid& uuid) {
  if (const auto section = entry.device.find(uuid);
      section != entry.device.end() && section->second.memory_total)
    return section->second.memory_total;
  return entry.all_devices.memory_total;
}

template <typename Entries>
std::optional<uint64_t> named_total(const Entries& entries, unsigned id, const GpuUuid& uuid) {
  const auto found = entries.find(id);
  if (found == entries.end()) return std::nullopt;
  return entry_total(found->second, uuid);
}

template <typename Entries>
std::optional<uint64_t> named_total_all(const Entries& entries, unsigned id) {
  const auto found = entries.find(id);
  if (found == entries.end()) return std::nullopt;
  return found->second.memory_total_all;
}

bool sets_total(const PolicyEntry& entry) {
  if (entry.all_devices.memory_total || entry.memory_total_all) return true;
  return std::any_of(entry.device.begin(), entry.device.end(),
                     [](const auto& section) { return section.second.memory_total.has_value(); });
}

}  // namespace

std::optional<uint64_t> Policy::group_memory_total(gid_t gid, const GpuUuid& uuid) const {
  return named_total(groups, gid, uuid);
}

std::optional<uint64_t> Policy::user_memory_total(uid_t uid, const GpuUuid& uuid) const {
  return named_total(users, uid, uuid);
}

std::optional<uint64_t> Policy::group_memory_total_all(gid_t gid) const {
  return named_total_all(groups, gid);
}

std::optional<uint64_t> Policy::user_memory_total_all(uid_t uid) const {
  return named_total_all(users, uid);
}

bool Policy::has_memory_totals() const {
  const auto any = [](const auto& entries) {
    return std::any_of(entries.begin(), entries.end(),
                       [](const auto& named) { return sets_total(named.second); });
  };
  return any(users) || any(groups);
}

}  // namespace gpulimit::server
