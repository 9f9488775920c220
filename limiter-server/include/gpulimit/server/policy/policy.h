// The administrator's policy (policy.toml, read by policy_file.h): per-user,
// per-group and default settings of memory, hard cap, weight and priority,
// for every device or one, which devices a user or group may use, and what
// to do about GPU processes that run without gpulimit.
//
// Who is who comes from the kernel (SO_PEERCRED's uid and gid, and the
// uid's supplementary groups from getgrouplist), never from the client.
//
// Precedence, setting by setting (each of memory, max_memory, sm, max_sm,
// weight, max_weight, priority, max_priority, devices, unmanaged, orphans,
// orphan_grace):
//   1. the user's entry, if it sets it;
//   2. else the entries of the groups the user is in that set it: the most
//      restrictive of them wins (the smallest number, the lowest priority,
//      the devices every one of them allows, kill over warn over allow), so
//      that being put in one more group never loosens a limit;
//   3. else [defaults], if it sets it;
//   4. else no limit.
// Within one entry, a device's own section comes before the entry's
// settings for every device. A default above the maximum that applies is
// lowered to it.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/options/limits.h"
#include "gpulimit/protocol/messages.h"

namespace gpulimit::server {

// What a process watcher does about a GPU process that does not run under
// gpulimit (one that unset LD_PRELOAD, or never had it).
enum class UnmanagedAction { kAllow, kWarn, kKill };
const char* unmanaged_action_name(UnmanagedAction action);

// What gpulimitd does about an orphan: a job whose main process exited while
// processes of it still use the GPU (loop/orphans.h). Warn: shown in status
// and logged. Kill: also SIGKILLed, every process of it, once it has been an
// orphan for the grace period.
enum class OrphanAction { kWarn, kKill };
const char* orphan_action_name(OrphanAction action);
inline constexpr uint32_t kMaxOrphanGraceSeconds = 7 * 24 * 3600;
// The usage history of fair share ([fair_share] half_life) keeps at most a
// year's half-life.
inline constexpr uint32_t kMaxHalfLifeSeconds = 365 * 24 * 3600;
struct OrphanRule {
  OrphanAction action = OrphanAction::kWarn;
  uint32_t grace_s = 60;

  friend bool operator==(const OrphanRule&, const OrphanRule&) = default;
};

using GpuUuid = options::DeviceUuid;  // the same 16 bytes everywhere

// The settings one table of the file gives. Memory is kept as written
// (bytes or a percentage of the device): it is resolved per device.
struct PolicySettings {
  std::optional<options::Amount> memory;      // cap of a job that asks for none
  std::optional<options::Amount> max_memory;  // the most a job may ask for
  std::optional<uint32_t> sm;                 // hard cap of a job that asks for none
  std::optional<uint32_t> max_sm;
  std::optional<uint32_t> weight;
  std::optional<uint32_t> max_weight;
  std::optional<protocol::Priority> priority;
  std::optional<protocol::Priority> max_priority;
  // Of [groups.NAME] and [users.NAME] only: the most all the group's (or
  // the user's) tenants may hold on a device together, in bytes. Not a
  // setting of the peer (no precedence): the entry's own total.
  std::optional<uint64_t> memory_total;
};

// [defaults], [users.NAME] or [groups.NAME].
struct PolicyEntry {
  PolicySettings all_devices;
  // [....device."GPU-..."] and [....device.N], N resolved to its UUID at load.
  std::map<GpuUuid, PolicySettings> device;
  std::optional<std::vector<GpuUuid>> allowed_devices;  // `devices = [...]`
  std::optional<UnmanagedAction> unmanaged;
  std::optional<OrphanAction> orphans;
  std::optional<uint32_t> orphan_grace_s;  // `orphan_grace`, in seconds
  // `memory_total_all`: of [groups.NAME] and [users.NAME] only, the most
  // all the group's (or user's) tenants may hold on all devices together.
  std::optional<uint64_t> memory_total_all;
  // `share`: of a group, its share of a device's time against other groups;
  // of a user, against the other users of the group its job runs as; in
  // [defaults], of every group and user whose entry sets none.
  std::optional<uint32_t> share;
};

// Who a peer is, from the kernel: its uid and every group it is in (the
// peer's gid first, then the uid's supplementary groups).
struct PeerIdentity {
  uid_t uid = 0;
  std::vector<gid_t> groups;
};
// `uid`'s identity with `gid` as its primary group, supplementary groups
// from getgrouplist() of the uid's name (none when it has no name).
PeerIdentity identify(uid_t uid, gid_t gid);

// The settings that apply to one peer on one device, after precedence,
// memory in bytes of that device.
struct EffectiveLimits {
  std::optional<uint64_t> memory;
  std::optional<uint64_t> max_memory;
  std::optional<uint32_t> sm;
  std::optional<uint32_t> max_sm;
  std::optional<uint32_t> weight;
  std::optional<uint32_t> max_weight;
  std::optional<protocol::Priority> priority;
  std::optional<protocol::Priority> max_priority;
};

struct Policy {
  std::string path;  // the file it was read from, for log lines
  PolicyEntry defaults;
  std::map<uid_t, PolicyEntry> users;
  std::map<gid_t, PolicyEntry> groups;
  // [fair_share] half_life: the usage history's half-life, in seconds; 0 or
  // unset: no history (token_scheduler.h).
  uint32_t usage_half_life_s = 0;

  // The limits of `who` on the device `uuid` of `device_total` bytes (a
  // percentage of a device whose size is unknown, 0, counts as unset).
  // Without a device: the settings for every device only.
  EffectiveLimits limits_for(const PeerIdentity& who, const GpuUuid* uuid,
                             uint64_t device_total) const;
  // The `memory_total` of group `gid` (or of user `uid`) on the device
  // `uuid`: its device section's, else its entry's; nullopt: none.
  std::optional<uint64_t> group_memory_total(gid_t gid, const GpuUuid& uuid) const;
  std::optional<uint64_t> user_memory_total(uid_t uid, const GpuUuid& uuid) const;
  // Their `memory_total_all`, of every device together; nullopt: none.
  std::optional<uint64_t> group_memory_total_all(gid_t gid) const;
  std::optional<uint64_t> user_memory_total_all(uid_t uid) const;
  // Whether any entry sets a memory_total.
  bool has_memory_totals() const;

  // Whether `who` may use the device `uuid` (`devices = [...]`).
  bool may_use(const PeerIdentity& who, const GpuUuid& uuid) const;
  // The devices `who` may use; nullopt: every device.
  std::optional<std::vector<GpuUuid>> allowed_devices(const PeerIdentity& who) const;

  // For a process watcher: what to do about an unmanaged GPU process of
  // `uid` whose (real or effective) group is `gid`; the uid's supplementary
  // groups are looked up (NSS: not for a hot path). `otherwise` when no
  // entry that applies says (a watcher's own default, e.g. its
  // --unmanaged).
  UnmanagedAction unmanaged_action(uid_t uid, gid_t gid,
                                   UnmanagedAction otherwise = UnmanagedAction::kAllow) const;
  UnmanagedAction unmanaged_action(const PeerIdentity& who,
                                   UnmanagedAction otherwise = UnmanagedAction::kAllow) const;
  // What to do about an orphaned job of `who`, setting by setting (orphans,
  // orphan_grace) as above: kill over warn, the shortest grace. `otherwise`
  // gives what no entry that applies says (gpulimitd's --orphans and
  // --orphan-grace).
  OrphanRule orphan_rule(const PeerIdentity& who, const OrphanRule& otherwise) const;
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (hex digits of either case) as
// 16 bytes; false when `text` is not one.
bool parse_gpu_uuid(const std::string& text, GpuUuid& out);
// The same, written as nvidia-smi writes UUIDs (lower case).
std::string format_gpu_uuid(const GpuUuid& uuid);

}  // namespace gpulimit::server
