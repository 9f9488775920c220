// Per device, the handshake of the current grant: which processes of the
// holder still owe an Ack after a revoke, and which have reported Idle. It
// turns per-process messages into the tenant-wide facts the scheduler acts
// on: "the holder has drained", "the holder is idle".
//
// Only processes that see the device (named its UUID in their Hello) can
// acknowledge it; a revoke waits for those connected at the revoke. A
// process that leaves owes nothing more.
//
// A holder forced by an ack timeout still owes its Acks: the processes that
// had not acknowledged are kept until each has acknowledged the grant it
// owed or left, and then the tenant has drained late (its overrun is
// charged up to then, TokenScheduler::late_drained), or until the tenant is
// granted the device again (which settles the overrun).
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "gpulimit/server/loop/tenant_registry.h"
#include "gpulimit/server/scheduling/scheduling_types.h"
#include "gpulimit/shm/board.h"

namespace gpulimit::server {

class HandoffTracker {
 public:
  enum class Verdict {
    kNoted,        // counted; the tenant-wide fact is not complete yet
    kComplete,     // with this one, every process drained (Ack) or is idle (Idle)
    kStale,        // not about the device's current grant to this tenant: dropped
    kLateDrained,  // with this one, a forced tenant's processes have all drained
  };
  // What a process's leaving completed on a device, for its tenant.
  struct Left {
    bool drained = false;       // the pending drain of the current holder
    bool late_drained = false;  // the late drain of a forced one
  };

  void granted(DeviceIndex device, TenantNumber tenant, uint32_t grant);
  // The holder was revoked; `owing` are its processes that must acknowledge.
  // kComplete when none must: the holder has drained already.
  Verdict revoked(DeviceIndex device, const std::vector<ConnectionId>& owing);
  void released(DeviceIndex device);
  // The holder's token was taken back without its drain (ack timeout): the
  // processes that still owe an Ack are kept, and the handshake ends.
  void forced(DeviceIndex device);

  Verdict ack(DeviceIndex device, TenantNumber tenant, ConnectionId connection, uint32_t grant);
  // `seeing`: the tenant's processes that see the device now.
  Verdict idle(DeviceIndex device, TenantNumber tenant, ConnectionId connection, uint32_t grant,
               const std::vector<ConnectionId>& seeing);
  // The process left: owes nothing more, for the current grant or a forced one.
  Left process_left(DeviceIndex device, ConnectionId connection);
  // Every process in `seeing` reported Idle under the current, unrevoked grant.
  bool all_idle(DeviceIndex device, const std::vector<ConnectionId>& seeing) const;
  // The holder's processes that still owe an Ack (for logs).
  std::vector<ConnectionId> owing(DeviceIndex device) const;

 private:
  struct Handshake {
    TenantNumber holder = kNoTenant;
    uint32_t grant = 0;
    bool revoked = false;
    std::set<ConnectionId> owing;
    std::set<ConnectionId> idle;
  };
  // A forced tenant's processes that owe an Ack, each for its grant.
  struct LateDrain {
    TenantNumber tenant = kNoTenant;
    std::set<std::pair<ConnectionId, uint32_t>> owing;
  };
  // Forced tenants kept per device at most; beyond, the oldest is dropped
  // (its overrun is then settled at its next grant). One per tenant: its
  // grant ends it, and only a holder is forced.
  static constexpr std::size_t kMaxLateDrains = 64;

  bool current(const Handshake& handshake, TenantNumber tenant, uint32_t grant) const;

  std::array<Handshake, shm::kBoardDevices> devices_{};
  std::array<std::vector<LateDrain>, shm::kBoardDevices> late_{};
};

}  // namespace gpulimit::server
