// Group and user memory totals in gpulimitd: the lease book (lease_book.h)
// joined to the tenants it serves. Each tenant a total binds when it joins
// gets a lease page (shm/lease_page.h) that its processes map read-only;
// the book's promises are written there, the tenants' ledgers are read for
// what they use, and a tenant's promises come back once its last process
// has exited (its pidfd, never its hang-up).
//
// What binds: the `memory_total` of the tenant's group (the gid its first
// process runs as, as for fair share) and of its user, per device, and
// their `memory_total_all` of every device together (policy.h). A total a
// reload adds binds the tenants that join after it; one it changes or
// removes applies to running tenants at once (a lower total refuses new
// leases; nothing held is taken away).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gpulimit/server/policy/policy.h"
#include "gpulimit/server/quota/lease_book.h"
#include "gpulimit/shm/lease_page.h"

namespace gpulimit::server {

class MemoryTotals {
 public:
  // Leases grow in steps of this where a total has room.
  static constexpr uint64_t kLeaseStep = uint64_t{256} << 20;

  MemoryTotals();

  struct DeviceSeen {
    DeviceIndex device = 0;
    GpuUuid uuid{};
  };
  struct Joined {
    // Per device of the join, in order: the smallest total that binds the
    // tenant there (its cap can be no larger), or nullopt: none.
    std::vector<std::optional<uint64_t>> bound;
    // Bit i: the process reserves within its lease on device i.
    uint32_t leased = 0;
    // The tenant's lease page; null when no total binds it.
    const shm::LeasePage* page = nullptr;
  };
  // A process of tenant `tenant` (of `uid`, in group `gid`: the tenant's)
  // has joined, seeing `devices`; `ledger_path` is where the tenant counts
  // its use; `new_tenant`: the process is the tenant's first (only a new
  // tenant can become bound: the processes before would not heed a lease).
  // Nullopt when a total binds it but no lease page could be made (`error`
  // says why): the process must be refused.
  std::optional<Joined> process_joined(TenantNumber tenant, bool new_tenant, uid_t uid, gid_t gid,
                                       const std::string& ledger_path,
                                       const std::vector<DeviceSeen>& devices, const Policy* policy,
                                       std::string& error);
  // One process that joined `tenant` has exited (the kernel says so).
  void process_exited(TenantNumber tenant);

  // A LeaseRequest: the lease written, or nullopt when the totals have no
  // room. Answered in the page either way.
  std::optional<uint64_t> request(TenantNumber tenant, DeviceIndex device, uint64_t need);
  // Whether a total bound `tenant` when it joined (it has a lease page).
  bool bound(TenantNumber tenant) const { return members_.contains(tenant); }

  // Writes into each bound tenant's page the room its totals leave it (the
  // totals less what the others under them hold, from their ledgers): what
  // its processes report as free memory. After every request and exit, and
  // every kRoomRefreshNs.
  void refresh_rooms();
  static constexpr TimeNs kRoomRefreshNs = 1'000'000'000;
  // Whether a total binds any running tenant.
  bool any_bound() const { return !members_.empty(); }

  // A reloaded policy: every total on the members' devices set anew.
  // Returns one line per total that changed.
  std::vector<std::string> apply_policy(const Policy* policy);

  struct TotalState {
    bool group = false;      // else a user's
    uint32_t id = 0;         // gid or uid
    DeviceIndex device = 0;  // kAllDevices: a memory_total_all
    uint64_t total = 0;
    uint64_t promised = 0;
    uint64_t used = 0;  // what its tenants' ledgers say they use there
    uint32_t tenants = 0;
  };
  // Every total that binds a member, for status and the metrics.
  std::vector<TotalState> report() const;

 private:
  struct Member {
    uid_t uid = 0;
    gid_t gid = 0;
    std::string ledger_path;
    std::map<DeviceIndex, GpuUuid> devices;
    std::unique_ptr<shm::LeasePage> page;
    uint32_t processes = 0;  // joined and not yet exited
  };

  using TotalKey = std::tuple<bool, uint32_t, DeviceIndex>;  // group?, gid or uid, device
  // The totals that may bind the member on `device`: its group's and its
  // user's there, then of all devices.
  static std::array<TotalKey, 4> keys_of(const Member& member, DeviceIndex device);
  void set_totals(const Member& member, DeviceIndex device, const GpuUuid& uuid,
                  const Policy* policy);
  uint64_t read_used(TenantNumber tenant, DeviceIndex device) const;
  void write_lease(TenantNumber tenant, DeviceIndex device, uint64_t bytes);

  LeaseBook book_;
  std::map<TenantNumber, Member> members_;
  // The totals as last set, to tell what a reload changed: (group?, id,
  // device or kAllDevices) -> bytes.
  std::map<TotalKey, uint64_t> totals_;
};

}  // namespace gpulimit::server
