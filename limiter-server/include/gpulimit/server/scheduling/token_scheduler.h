// Who holds each device's token, and when it changes hands: the scheduling
// rules of gpulimitd, as pure logic. No system call, no clock: every call
// takes the time `now`, and the changes it decides are taken out with
// take_changes() for the event loop to write to the board. Unit tests drive
// it with made-up times.
//
// Per device, one token. A tenant holding it launches freely; the others wait.
//   - Shares: hierarchical stride scheduling on virtual time, over the
//     fair-share tree (ShareBranch): groups, their users, the users'
//     tenants. Time held is charged to the holder as vtime += held / weight,
//     to its user as += held / user share and to its group as
//     += held / group share. Two waiters are compared where their branches
//     part: by their groups' vtimes if their groups differ, else by their
//     users', else by their own; the lower goes next. So one user's eight
//     tenants split one user's share, and a group's users split the
//     group's. A group, user or tenant that starts wanting after being
//     idle (wanting nothing for more than a quantum) gets
//     vtime = max(its vtime, lowest vtime of its active siblings, or of the
//     last active ones when none is), so idling earns no credit and costs
//     none; one whose hold has just ended keeps what it is owed. With every tenant in one group and
//     user (the default branch) this is plain stride scheduling by weight.
//   - Usage history (off unless usage_half_life_ns > 0): each group and user
//     keeps its time held on the device, decayed with that half-life. Among
//     the groups that want the device (and among a group's users that do),
//     a member with normalized usage U and normalized share S is charged
//     as if its share were share * 2^(-U/S), the fair-share factor of
//     Slurm's classic algorithm (U/S capped at kMaxUsageExponent): one that
//     used more than its share recently gets less now, until the history
//     decays. Idle time still earns no vtime credit; only history counts.
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
//     first ones). The forced holder still owes its drain: when its
//     processes' late Acks come (or the last of them leaves), or at its next
//     grant if that comes first, the time from the forced release to then is
//     charged to it as held time (late_drained), so a deep queue or a kernel
//     longer than the timeout pays for what it ran, under a weight as under
//     a cap.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
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

// The fair-share factor never falls below 2^-kMaxUsageExponent: a member
// that used the device alone for days still gets a 1/1024th weight.
inline constexpr double kMaxUsageExponent = 10;

struct SchedulerSettings {
  TimeNs quantum_ns = kDefaultQuantumNs;
  TimeNs usage_half_life_ns = 0;  // 0: no usage history
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

  // A tenant, its share and its place in the fair-share tree, before it
  // wants anything.
  void add_tenant(TenantNumber tenant, const ComputeShare& share,
                  const ShareBranch& branch = ShareBranch{});
  // The tenant's share changes (a policy reload): time held so far is
  // charged under the old share, from `now` on under the new one; a hard
  // cap's bank is kept, but never above the new cap's.
  void change_share(TenantNumber tenant, const ComputeShare& share, TimeNs now);
  // The group and user shares of the tenant's branch change (a policy
  // reload), charged as a share change is; its group and user stay.
  void change_branch(TenantNumber tenant, const ShareBranch& branch, TimeNs now);
  // The usage history's half-life changes (a policy reload); 0 turns it off.
  // The history kept so far is decayed under the old one up to `now`.
  void set_usage_half_life(TimeNs half_life_ns, TimeNs now);
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
  // A holder forced by an ack timeout has drained since (its processes'
  // last late Ack, or the last of them left, at `now`): the time from the
  // forced release to `now` is charged to it as held time. Ignored unless
  // the tenant was forced on the device and has neither drained nor been
  // granted it again since (a grant settles the overrun up to then).
  void late_drained(TenantNumber tenant, DeviceIndex device, TimeNs now);
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
    ShareBranch branch;  // likewise
    bool wanting = false;
    uint64_t wanted_order = 0;  // first come, first served among equals
    TimeNs wanting_since = 0;   // while wanting: since when, not holding the token
    int64_t vtime = 0;          // ns held / weight
    int64_t vtime_remainder = 0;
    int64_t budget_ns = 0;              // hard cap only; negative: debt
    TimeNs budget_at = 0;               // budget_ns is as of this time
    std::deque<Interval> recent_holds;  // ended holds within the share window
    TimeNs seated_at = 0;
    std::optional<TimeNs> active_until;  // when it last stopped wanting or holding
    // Forced by an ack timeout, not drained nor granted again since: when.
    std::optional<TimeNs> forced_at;
  };
  // A group or a user on a device: the inner nodes of the fair-share tree.
  struct Node {
    int64_t vtime = 0;  // ns its tenants held / its share
    int64_t vtime_remainder = 0;
    uint64_t active_order = 0;           // when it last started wanting: ties go first come
    int64_t children_floor = 0;          // the lowest vtime of its active children, as last seen
    std::optional<TimeNs> active_until;  // when a member last stopped wanting or holding
    uint32_t share = 1;                  // as its members' branches last said
    double usage_ns = 0;                 // time held, decayed by the half-life up to usage_at
    TimeNs usage_at = 0;
  };
  using UserKey = std::pair<uint32_t, uint32_t>;  // group, user
  // The vtime and order a waiter is compared by at one level of the tree.
  struct Standing {
    int64_t vtime;
    uint64_t order;
  };
  struct Device {
    std::map<TenantNumber, Seat> seats;
    std::map<uint32_t, Node> groups;
    std::map<UserKey, Node> users;
    int64_t groups_floor = 0;  // the lowest vtime of the active groups, as last seen
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

  static bool active(const Device& device, TenantNumber tenant, const Seat& seat);
  // A group's or user's node; one never seen is an idle node of vtime 0.
  template <typename Key>
  static const Node& node_of(const std::map<Key, Node>& nodes, const Key& key);
  void charge_holder(Device& device, TimeNs now);
  // Charges `held` ns, ending at `now`, to the seat's vtime, its branch's
  // nodes and (hard cap) its budget, which is then as of `now`.
  void charge_held(Device& device, Seat& seat, TimeNs held, TimeNs now);
  // A forced seat's overrun, from its forced release to `now`, charged.
  void settle_overrun(TenantNumber tenant, DeviceIndex index, Device& device, Seat& seat,
                      TimeNs now);
  // Charges `held` ns to a group or user under its fair-share factor.
  void charge_node(Node& node, TimeNs held, double factor, TimeNs now);
  double decayed_usage(const Node& node, TimeNs now) const;
  // The fair-share factor of the seat's group (users: false) or of its user
  // within the group (users: true), among those that want the device now.
  double usage_factor(const Device& device, const Seat& seat, bool users, TimeNs now) const;
  // The lowest vtime of each level's active members, kept as its floor.
  void raise_floors(Device& device);
  // A tenant starts wanting: its group, its user and itself, whichever was
  // idle, are lifted to their active siblings.
  void lift_vtime(Device& device, TenantNumber tenant, TimeNs now);
  // The seat stops wanting or holding at `now`, and so may its user and group.
  void mark_inactive(Device& device, Seat& seat, TimeNs now);
  std::optional<TenantNumber> best_waiter(const Device& device, TimeNs now) const;
  // Where two tenants' branches part: their standings at that level.
  std::pair<Standing, Standing> standings(const Device& device, const Seat& seat_a,
                                          const Seat& seat_b) const;
  // Which of two waiters goes first.
  bool goes_before(const Device& device, const Seat& seat_a, const Seat& seat_b) const;
  // At a quantum's end: the holder is still strictly ahead of the best waiter.
  bool keeps_token(const Device& device, const Seat& holder_seat, const Seat& waiter_seat) const;

  void grant(DeviceIndex index, Device& device, TenantNumber tenant, TimeNs now);
  void revoke(DeviceIndex index, Device& device, TokenChange::Reason reason, TimeNs now);
  void release(DeviceIndex index, Device& device, TokenChange::Reason reason, TimeNs now);
  // Decides what the device's state calls for at `now`.
  void reconsider(DeviceIndex index, Device& device, TimeNs now);
  TimeNs device_deadline(const Device& device, TimeNs now) const;

  SchedulerSettings settings_;
  std::map<TenantNumber, ComputeShare> tenants_;
  std::map<TenantNumber, ShareBranch> branches_;
  std::map<DeviceIndex, Device> devices_;
  std::map<TenantNumber, std::map<DeviceIndex, TenantDeviceCounters>> counters_;
  uint64_t want_counter_ = 0;
  std::vector<TokenChange> changes_;
};

}  // namespace gpulimit::server
