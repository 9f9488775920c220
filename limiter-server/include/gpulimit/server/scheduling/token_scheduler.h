// Who holds each device's token, and when it changes hands: the scheduling
// rules of gpulimitd, as pure logic. No system call, no clock: every call
// takes the time `now`, and the changes it decides are taken out with
// take_changes() for the event loop to write to the board. Unit tests drive
// it with made-up times.
//
// Per device, one token. A tenant holding it launches freely; the others wait.
//   - Weights: stride scheduling on virtual time. Time held is charged as
//     vtime += held / weight; the waiter with the lowest vtime goes next. A
//     tenant that starts wanting after being idle gets
//     vtime = max(its vtime, lowest vtime of the active tenants), so idling
//     earns no credit and costs none.
//   - Priority: high > normal > low, strictly. At a quantum's end a waiting
//     tenant of a higher class goes before any of a lower one.
//   - Hard cap (sm_percent P): a token bucket of GPU time. The budget accrues
//     P % of wall time up to P % of the cap window, and the time held is
//     taken from it; overrun becomes debt. The token is taken back when the
//     budget runs out, whoever waits, and granted again only once it has
//     grown back to a slice (the smaller of a quantum and the full bucket).
//   - A lone tenant without a cap keeps the token as long as nobody else
//     wants it: no quantum, no revoke, no throttling.
//   - Quantum: once another tenant waits, the holder keeps the token for one
//     quantum (or less, if it already held it a quantum), then it is revoked,
//     unless the holder would be picked again anyway. A holder whose
//     processes all report Idle gives it back at once when somebody waits.
//   - Handoff: a revoke asks the holder's processes to drain and Ack; the
//     time held is charged from grant to the last ack, so overrun past the
//     quantum is paid back by vtime and budget. A holder that has not drained
//     within the ack timeout is forced: the token goes to the next tenant
//     anyway. That is the one case where kernels of two tenants may run at
//     the same time (the forced holder's queued kernels, the next tenant's
//     first ones); the overrun is charged to the forced holder.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <vector>

#include "gpulimit/server/metrics/tenant_statistics.h"
#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

// 20 ms: handing the token over costs a revoke, a drain of what the holder
// queued (its in-flight kernels; tens of microseconds to a few milliseconds
// for training steps) and a grant. At 20 ms a handoff of up to 1 ms costs at
// most 5 % of the time, while a waiting tenant waits at most one quantum per
// tenant ahead of it, which keeps interactive and inference work responsive.
inline constexpr TimeNs kDefaultQuantumNs = 20 * kNsPerMs;
// A drain normally takes far less than a quantum; a holder that has not
// acknowledged after 5 quanta (100 ms at least) is stuck or hostile.
TimeNs default_ack_timeout(TimeNs quantum_ns);
// The hard cap's bucket holds P % of this much GPU time.
inline constexpr TimeNs kDefaultCapWindowNs = 100 * kNsPerMs;
// share_achieved is measured over this much recent time: long enough to span
// many quanta of several tenants, short enough to follow a change of load.
inline constexpr TimeNs kDefaultShareWindowNs = 10'000 * kNsPerMs;

struct SchedulerSettings {
  TimeNs quantum_ns = kDefaultQuantumNs;
  TimeNs ack_timeout_ns = default_ack_timeout(kDefaultQuantumNs);
  TimeNs cap_window_ns = kDefaultCapWindowNs;
  TimeNs share_window_ns = kDefaultShareWindowNs;
};

// One change of a device's token, for the board.
struct TokenChange {
  enum class Kind : uint8_t {
    kGrant,    // `tenant` holds the token now
    kRevoke,   // `tenant` must drain and acknowledge
    kRelease,  // `tenant` no longer holds the token; a kGrant may follow
  };
  enum class Reason : uint8_t {
    kNone,
    kQuantumEnd,  // kRevoke: another tenant goes next
    kCapSpent,    // kRevoke: the holder's hard-cap budget ran out
    kIdle,        // kRevoke: the holder's processes are idle and others wait
    kDrained,     // kRelease: every process of the holder acknowledged
    kAckTimeout,  // kRelease: forced, the holder did not drain in time
    kHolderLeft,  // kRelease: the holder has no process on the device left
  };
  Kind kind = Kind::kGrant;
  DeviceIndex device = 0;
  TenantNumber tenant = kNoTenant;
  Reason reason = Reason::kNone;
  TimeNs held_ns = 0;  // kRelease: how long the hold lasted, as charged

  friend bool operator==(const TokenChange&, const TokenChange&) = default;
};

// A tenant on one device, for status.
struct DeviceShareFigures {
  TimeNs held_ns = 0;         // held in total, the running hold included
  double share_achieved = 0;  // held / wall time over the share window
  double share_target = 0;    // the rules' target under current demand
};

class TokenScheduler {
 public:
  explicit TokenScheduler(const SchedulerSettings& settings);

  const SchedulerSettings& settings() const { return settings_; }

  // A tenant and its share, before it wants anything.
  void add_tenant(TenantNumber tenant, const ComputeShare& share);
  // The tenant's share changes (a policy reload): time held so far is
  // charged under the old share, from `now` on under the new one; a hard
  // cap's bank is kept, but never above the new cap's.
  void change_share(TenantNumber tenant, const ComputeShare& share, TimeNs now);
  // The tenant is gone: released wherever it holds a token.
  void remove_tenant(TenantNumber tenant, TimeNs now);
  // The tenant has no process left that uses `device`: released if it holds
  // the token there, and no longer wanting it.
  void leave_device(TenantNumber tenant, DeviceIndex device, TimeNs now);
  // The device's board slot was withdrawn (no process uses it), and may
  // come back as another GPU: everything known of it goes, the counters of
  // tenants that used it before included.
  void forget_device(DeviceIndex device, TimeNs now);

  // Whether some process of the tenant waits for the device's token.
  void set_wanting(TenantNumber tenant, DeviceIndex device, bool wanting, TimeNs now);
  // Every process of the holder reported Idle under the current grant.
  void holder_idle(TenantNumber tenant, DeviceIndex device, TimeNs now);
  // Every process of the holder acknowledged the revoke (the last ack came
  // at `now`). Ignored unless `tenant` holds the device's token, revoked.
  void holder_drained(TenantNumber tenant, DeviceIndex device, TimeNs now);
  // Acts on every deadline up to `now`: quantum ends, spent budgets, ack
  // timeouts, budgets grown back.
  void advance(TimeNs now);

  // When advance() has something to do next, after `now` (the time of the
  // last call); nullopt: nothing until an event.
  std::optional<TimeNs> next_deadline(TimeNs now) const;
  // The changes decided since the last call, in order.
  std::vector<TokenChange> take_changes();

  TenantNumber holder(DeviceIndex device) const;
  bool revoked(DeviceIndex device) const;
  // Tenants other than the holder that want the device.
  uint32_t waiting(DeviceIndex device) const;
  DeviceShareFigures figures(TenantNumber tenant, DeviceIndex device, TimeNs now) const;
  // What the tenant went through on the device as of `now` (running hold and
  // wait included); zeros for a tenant that never wanted it. Kept while the
  // tenant lives, even when its processes leave the device and come back.
  TenantDeviceCounters statistics(TenantNumber tenant, DeviceIndex device, TimeNs now) const;

 private:
  struct Interval {
    TimeNs start;
    TimeNs end;
  };
  // A tenant on a device, once it has wanted it.
  struct Seat {
    ComputeShare share;  // the tenant's, copied: read on every decision
    bool wanting = false;
    uint64_t wanted_order = 0;  // first come, first served among equals
    TimeNs wanting_since = 0;   // while wanting: since when, not holding the token
    int64_t vtime = 0;          // ns held / weight
    int64_t vtime_remainder = 0;
    int64_t budget_ns = 0;              // hard cap only; negative: debt
    TimeNs budget_at = 0;               // budget_ns is as of this time
    std::deque<Interval> recent_holds;  // ended holds within the share window
    TimeNs seated_at = 0;
  };
  struct Device {
    std::map<TenantNumber, Seat> seats;
    TenantNumber holder = kNoTenant;
    bool revoked = false;
    bool holder_idle = false;
    TimeNs granted_at = 0;
    TimeNs charged_until = 0;
    TimeNs quantum_end = kNever;  // kNever while nobody else can take the token
    TimeNs revoked_at = 0;
  };

  Device& device_at(DeviceIndex device);
  const Device* find_device(DeviceIndex device) const;
  const ComputeShare& share_of(TenantNumber tenant) const;
  Seat& seat_for(Device& device, TenantNumber tenant, TimeNs now);
  TenantDeviceCounters& counters_for(TenantNumber tenant, DeviceIndex device);
  // A wait that ends without a grant: counted in wait_ns, not in the histogram.
  void end_wait_unserved(TenantNumber tenant, DeviceIndex device, Seat& seat, TimeNs now);

  // Hard cap.
  int64_t budget_max(const ComputeShare& share) const;
  int64_t grant_threshold(const ComputeShare& share) const;
  int64_t budget_at(const Seat& seat, const ComputeShare& share, TimeNs now, bool holding) const;
  TimeNs eligible_from(const Seat& seat, const ComputeShare& share) const;
  bool eligible(const Seat& seat, TimeNs now) const;

  void charge_holder(Device& device, TimeNs now);
  void lift_vtime(Device& device, TenantNumber tenant);
  std::optional<TenantNumber> best_waiter(const Device& device, TimeNs now) const;
  // Which of two waiters goes first.
  bool goes_before(const Seat& seat_a, const Seat& seat_b) const;
  // At a quantum's end: the holder is still strictly ahead of the best waiter.
  bool keeps_token(const Seat& holder_seat, const Seat& waiter_seat) const;

  void grant(DeviceIndex index, Device& device, TenantNumber tenant, TimeNs now);
  void revoke(DeviceIndex index, Device& device, TokenChange::Reason reason, TimeNs now);
  void release(DeviceIndex index, Device& device, TokenChange::Reason reason, TimeNs now);
  // Decides what the device's state calls for at `now`.
  void reconsider(DeviceIndex index, Device& device, TimeNs now);
  TimeNs device_deadline(const Device& device, TimeNs now) const;

  SchedulerSettings settings_;
  std::map<TenantNumber, ComputeShare> tenants_;
  std::map<DeviceIndex, Device> devices_;
  std::map<TenantNumber, std::map<DeviceIndex, TenantDeviceCounters>> counters_;
  uint64_t want_counter_ = 0;
  std::vector<TokenChange> changes_;
};

}  // namespace gpulimit::server
