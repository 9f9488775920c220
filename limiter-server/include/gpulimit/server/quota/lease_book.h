// The server's half of group and user memory totals: what it has promised
// each tenant of a device (its lease), so that the promises under a total
// never add up past it. Pure logic: the tenants' ledger counts are read and
// their lease pages written through the callbacks a call is given, so unit
// tests can race them. The protocol, its steps (G1-G4, S1-S3) and what SPIN
// checked of it: limiter-server/model/README.md.
// gpulimitd's use of it: memory_totals.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

// No total binds: the lease a tenant is given then.
inline constexpr uint64_t kUnlimitedLease = UINT64_MAX;
// A total's device when it is of every device together: what its tenants
// are promised on all devices adds up to at most it.
inline constexpr DeviceIndex kAllDevices = UINT32_MAX;

class LeaseBook {
 public:
  // A tenant's ledger count on a device, as it is now (S1, S3).
  using ReadUsed = std::function<uint64_t(TenantNumber, DeviceIndex)>;
  // Stores the tenant's lease on a device into its lease page, seq_cst (S2,
  // G1, G3).
  using WriteLease = std::function<void(TenantNumber, DeviceIndex, uint64_t)>;

  // Leases are granted in steps of `chunk_bytes` where the total has room,
  // so that a tenant allocating a little at a time asks seldom.
  explicit LeaseBook(uint64_t chunk_bytes);

  // The group's (gid) or user's (uid) total on a device, or on all of them
  // together (kAllDevices); nullopt: none. A lower total refuses new
  // leases; nothing promised is taken back.
  void set_group_total(uint32_t group, DeviceIndex device, std::optional<uint64_t> bytes);
  void set_user_total(uint32_t user, DeviceIndex device, std::optional<uint64_t> bytes);

  void add_tenant(TenantNumber tenant, uint32_t group, uint32_t user);
  // The tenant already holds `bytes` on the device (its ledger says so) and
  // is promised nothing there yet: it is promised what it holds, beyond
  // the totals if need be, so that nobody else is granted that memory. A
  // server started anew learns its tenants' holdings so.
  void adopt(TenantNumber tenant, DeviceIndex device, uint64_t bytes);
  // The tenant's last process has exited (its pidfd, never its hang-up or
  // its SIGKILL: the kernel has freed its memory): its promises come back.
  void remove_tenant(TenantNumber tenant);

  // The tenant needs a lease of `need` bytes on the device (what it would
  // hold after the reservation it could not make): G1-G4. The lease written
  // and returned, at least `need`; nullopt when a total has no room even
  // after taking back what the others do not use.
  std::optional<uint64_t> request(TenantNumber tenant, DeviceIndex device, uint64_t need,
                                  const ReadUsed& read_used, const WriteLease& write_lease);

  // What the tenant is promised on the device (kUnlimitedLease when no
  // total binds it), and what is promised under a total (kAllDevices: on
  // every device), for status.
  uint64_t promised(TenantNumber tenant, DeviceIndex device) const;
  uint64_t group_promised(uint32_t group, DeviceIndex device) const;
  uint64_t user_promised(uint32_t user, DeviceIndex device) const;

 private:
  enum class Scope { kGroup, kUser };
  using TotalKey = std::tuple<Scope, uint32_t, DeviceIndex>;
  struct Member {
    uint32_t group = 0;
    uint32_t user = 0;
    std::map<DeviceIndex, uint64_t> promised;  // bytes, under a total only
  };

  void set_total(const TotalKey& key, std::optional<uint64_t> bytes);
  // The total `key` names; nullopt: none.
  std::optional<uint64_t> total(const TotalKey& key) const;
  // The totals that bind the member on the device: its group's and its
  // user's, on the device and on all devices.
  std::vector<TotalKey> totals_of(const Member& member, DeviceIndex device) const;
  bool bound(const Member& member, DeviceIndex device) const;
  uint64_t promised_under(const TotalKey& key) const;
  // The most the tenant may be promised on the device: the smallest room
  // of its totals, counting its own promise as room.
  uint64_t ceiling(const Member& member, DeviceIndex device) const;
  // S1-S3: takes back from `other` what it does not use.
  void shrink(TenantNumber other, Member& member, DeviceIndex device, const ReadUsed& read_used,
              const WriteLease& write_lease);

  uint64_t chunk_;
  std::map<TotalKey, uint64_t> totals_;
  std::map<TenantNumber, Member> members_;
};

}  // namespace gpulimit::server
