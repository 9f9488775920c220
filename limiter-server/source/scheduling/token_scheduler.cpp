#include "gpulimit/server/scheduling/token_scheduler.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "gpulimit/server/scheduling/share_targets.h"

namespace gpulimit::server {
namespace {

constexpr TimeNs kMinAckTimeoutNs = 100 * kNsPerMs;
constexpr int64_t kAckTimeoutQuanta = 5;

// Ceiling of a / b for a >= 0, b > 0.
int64_t divide_up(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Exact integer stride: `held` ns charged at `share`, the remainder carried
// so that no nanosecond is lost.
void charge_stride(int64_t& vtime, int64_t& remainder, int64_t held, uint32_t share) {
  const int64_t scaled = held + remainder;
  vtime += scaled / share;
  remainder = scaled % share;
}

// `lowest` becomes the lower of itself (none: no vtime yet) and `vtime`.
void lower_to(std::optional<int64_t>& lowest, int64_t vtime) {
  lowest = lowest ? std::min(*lowest, vtime) : vtime;
}

// Idling earns no credit: a vtime behind `lowest` is brought up to it.
void lift_to(int64_t& vtime, int64_t& remainder, int64_t lowest) {
  if (lowest > vtime) {
    vtime = lowest;
    remainder = 0;
  }
}

ShareBranch kept_branch(const ShareBranch& branch) {
  ShareBranch kept = branch;
  kept.group_share = std::max<uint32_t>(1, branch.group_share);  // divisors of held time
  kept.user_share = std::max<uint32_t>(1, branch.user_share);
  return kept;
}

// The length of [start, end) that lies within [from, to).
TimeNs overlap(TimeNs start, TimeNs end, TimeNs from, TimeNs to) {
  return std::max<TimeNs>(0, std::min(end, to) - std::max(start, from));
}

}  // namespace

TimeNs default_ack_timeout(TimeNs quantum_ns) {
  return std::max(kMinAckTimeoutNs, kAckTimeoutQuanta * quantum_ns);
}

TokenScheduler::TokenScheduler(const SchedulerSettings& settings) : settings_(settings) {}

void TokenScheduler::add_tenant(TenantNumber tenant, const ComputeShare& share,
                                const ShareBranch& branch) {
  ComputeShare& kept = tenants_[tenant];
  kept = share;
  kept.weight = std::max<uint32_t>(1, share.weight);  // a divisor of held time
  branches_[tenant] = kept_branch(branch);
}

void TokenScheduler::change_branch(TenantNumber tenant, const ShareBranch& branch, TimeNs now) {
  const auto known = branches_.find(tenant);
  if (known == branches_.end()) return;
  ShareBranch kept = kept_branch(branch);
  kept.group = known->second.group;  // who the tenant is does not change
  kept.user = known->second.user;
  known->second = kept;
  for (auto& [index, device] : devices_) {
    const auto found = device.seats.find(tenant);
    if (found == device.seats.end()) continue;
    charge_holder(device, now);  // what was held so far, under the old shares
    found->second.branch = kept;
    device.groups[kept.group].share = kept.group_share;
    device.users[{kept.group, kept.user}].share = kept.user_share;
    reconsider(index, device, now);
  }
}

void TokenScheduler::change_share(TenantNumber tenant, const ComputeShare& share, TimeNs now) {
  const auto known = tenants_.find(tenant);
  if (known == tenants_.end()) return;
  ComputeShare kept = share;
  kept.weight = std::max<uint32_t>(1, share.weight);
  known->second = kept;
  for (auto& [index, device] : devices_) {
    const auto found = device.seats.find(tenant);
    if (found == device.seats.end()) continue;
    charge_holder(device, now);
    Seat& seat = found->second;
    const bool holding = device.holder == tenant;
    if (has_hard_cap(seat.share)) {
      seat.budget_ns = budget_at(seat, seat.share, now, holding);
    } else {
      seat.budget_ns = grant_threshold(kept);  // a new cap opens as a new tenant's does
    }
    seat.budget_at = now;
    seat.share = kept;
    if (has_hard_cap(kept)) seat.budget_ns = std::min(seat.budget_ns, budget_max(kept));
    seat.vtime_remainder = 0;  // under a weight's worth of nanoseconds
    reconsider(index, device, now);
  }
}

void TokenScheduler::remove_tenant(TenantNumber tenant, TimeNs now) {
  for (auto& [index, device] : devices_)
    leave_device(tenant, index, now);
  tenants_.erase(tenant);
  branches_.erase(tenant);
  counters_.erase(tenant);
}

void TokenScheduler::leave_device(TenantNumber tenant, DeviceIndex index, TimeNs now) {
  const auto found = devices_.find(index);
  if (found == devices_.end()) return;
  Device& device = found->second;
  if (device.holder == tenant) release(index, device, TokenChange::Reason::kHolderLeft, now);
  if (const auto seat = device.seats.find(tenant); seat != device.seats.end()) {
    end_wait_unserved(tenant, index, seat->second, now);
    if (seat->second.wanting) mark_inactive(device, seat->second, now);
    device.seats.erase(seat);
  }
  reconsider(index, device, now);
}

void TokenScheduler::forget_device(DeviceIndex index, TimeNs now) {
  if (const auto found = devices_.find(index); found != devices_.end()) {
    Device& device = found->second;
    if (device.holder != kNoTenant) release(index, device, TokenChange::Reason::kHolderLeft, now);
    devices_.erase(found);
  }
  for (auto& [tenant, devices] : counters_)
    devices.erase(index);
}

void TokenScheduler::set_wanting(TenantNumber tenant, DeviceIndex index, bool wanting, TimeNs now) {
  if (!tenants_.contains(tenant)) return;
  Device& device = device_at(index);
  Seat& seat = seat_for(device, tenant, now);
  if (wanting) {
    if (seat.wanting) return;
    if (device.holder == tenant && !device.revoked) return;  // it holds the token already
    charge_holder(device, now);
    const bool was_active = device.holder == tenant;  // draining, and wants it again
    seat.wanting = true;
    seat.wanted_order = ++want_counter_;
    // A draining holder's wait starts when its hold ends (release()).
    seat.wanting_since = now;
    if (!was_active) lift_vtime(device, tenant, now);
  } else {
    if (!seat.wanting) return;
    end_wait_unserved(tenant, index, seat, now);
    seat.wanting = false;
    if (device.holder != tenant) mark_inactive(device, seat, now);
  }
  reconsider(index, device, now);
}

void TokenScheduler::holder_idle(TenantNumber tenant, DeviceIndex index, TimeNs now) {
  const auto found = devices_.find(index);
  if (found == devices_.end()) return;
  Device& device = found->second;
  if (device.holder != tenant || device.revoked) return;
  device.holder_idle = true;
  reconsider(index, device, now);
}

void TokenScheduler::holder_drained(TenantNumber tenant, DeviceIndex index, TimeNs now) {
  const auto found = devices_.find(index);
  if (found == devices_.end()) return;
  Device& device = found->second;
  if (device.holder != tenant || !device.revoked) return;
  release(index, device, TokenChange::Reason::kDrained, now);
  reconsider(index, device, now);
}

void TokenScheduler::late_drained(TenantNumber tenant, DeviceIndex index, TimeNs now) {
  const auto found = devices_.find(index);
  if (found == devices_.end()) return;
  Device& device = found->second;
  const auto seat = device.seats.find(tenant);
  if (seat == device.seats.end() || !seat->second.forced_at) return;
  settle_overrun(tenant, index, device, seat->second, now);
  // A debt or a vtime that changes who goes next, or when.
  reconsider(index, device, now);
}

void TokenScheduler::advance(TimeNs now) {
  for (auto& [index, device] : devices_)
    reconsider(index, device, now);
}

std::optional<TimeNs> TokenScheduler::next_deadline(TimeNs now) const {
  TimeNs earliest = kNever;
  for (const auto& [index, device] : devices_)
    earliest = std::min(earliest, device_deadline(device, now));
  if (earliest == kNever) return std::nullopt;
  return earliest;
}

std::vector<TokenChange> TokenScheduler::take_changes() {
  std::vector<TokenChange> taken;
  taken.swap(changes_);
  return taken;
}

TenantNumber TokenScheduler::holder(DeviceIndex index) const {
  const Device* device = find_device(index);
  return device ? device->holder : kNoTenant;
}

bool TokenScheduler::revoked(DeviceIndex index) const {
  const Device* device = find_device(index);
  return device && device->revoked;
}

uint32_t TokenScheduler::waiting(DeviceIndex index) const {
  const Device* device = find_device(index);
  if (!device) return 0;
  uint32_t count = 0;
  for (const auto& [tenant, seat] : device->seats)
    if (seat.wanting && tenant != device->holder) ++count;
  return count;
}

DeviceShareFigures TokenScheduler::figures(TenantNumber tenant, DeviceIndex index,
                                           TimeNs now) const {
  DeviceShareFigures figures;
  const Device* device = find_device(index);
  if (!device) return figures;
  const auto found = device->seats.find(tenant);
  if (found == device->seats.end()) return figures;
  const Seat& seat = found->second;
  const bool holding = device->holder == tenant;

  figures.held_ns = statistics(tenant, index, now).held_ns;
  const TimeNs window_start = now - settings_.share_window_ns;
  TimeNs recent = holding ? overlap(device->granted_at, now, window_start, now) : 0;
  for (const Interval& hold : seat.recent_holds)
    recent += overlap(hold.start, hold.end, window_start, now);
  const TimeNs wall = std::min(settings_.share_window_ns, now - seat.seated_at);
  figures.share_achieved = wall > 0 ? static_cast<double>(recent) / static_cast<double>(wall) : 0;

  std::vector<ShareDemand> demands;
  for (const auto& [other, other_seat] : device->seats)
    if (active(*device, other, other_seat))
      demands.push_back(ShareDemand{other, other_seat.share, other_seat.branch,
                                    usage_factor(*device, other_seat, false, now),
                                    usage_factor(*device, other_seat, true, now)});
  for (const ShareTarget& target : share_targets(demands))
    if (target.tenant == tenant) figures.share_target = target.fraction;
  return figures;
}

TenantDeviceCounters TokenScheduler::statistics(TenantNumber tenant, DeviceIndex index,
                                                TimeNs now) const {
  TenantDeviceCounters counters;
  if (const auto of_tenant = counters_.find(tenant); of_tenant != counters_.end())
    if (const auto found = of_tenant->second.find(index); found != of_tenant->second.end())
      counters = found->second;
  const Device* device = find_device(index);
  if (!device) return counters;
  const auto seat = device->seats.find(tenant);
  if (seat == device->seats.end()) return counters;
  if (device->holder == tenant) {
    counters.held_ns += now - device->granted_at;
  } else if (seat->second.wanting) {
    counters.wait_ns += now - seat->second.wanting_since;
  }
  return counters;
}

TenantDeviceCounters& TokenScheduler::counters_for(TenantNumber tenant, DeviceIndex device) {
  return counters_[tenant][device];
}

void TokenScheduler::end_wait_unserved(TenantNumber tenant, DeviceIndex index, Seat& seat,
                                       TimeNs now) {
  const Device& device = devices_.at(index);
  if (!seat.wanting || device.holder == tenant) return;
  counters_for(tenant, index).wait_ns += now - seat.wanting_since;
}

TokenScheduler::Device& TokenScheduler::device_at(DeviceIndex index) {
  return devices_[index];
}

const TokenScheduler::Device* TokenScheduler::find_device(DeviceIndex index) const {
  const auto found = devices_.find(index);
  return found == devices_.end() ? nullptr : &found->second;
}

const ComputeShare& TokenScheduler::share_of(TenantNumber tenant) const {
  static const ComputeShare kNone{};
  const auto found = tenants_.find(tenant);
  return found == tenants_.end() ? kNone : found->second;
}

TokenScheduler::Seat& TokenScheduler::seat_for(Device& device, TenantNumber tenant, TimeNs now) {
  const auto [found, created] = device.seats.try_emplace(tenant);
  Seat& seat = found->second;
  if (created) {
    seat.share = share_of(tenant);
    if (const auto branch = branches_.find(tenant); branch != branches_.end())
      seat.branch = branch->second;
    seat.seated_at = now;
    // One slice to start with, not a full bucket: a new tenant opens with no
    // burst beyond its cap.
    seat.budget_ns = grant_threshold(seat.share);
    seat.budget_at = now;
  }
  return seat;
}

int64_t TokenScheduler::budget_max(const ComputeShare& share) const {
  return settings_.cap_window_ns * share.sm_percent / 100;
}

int64_t TokenScheduler::grant_threshold(const ComputeShare& share) const {
  return std::max<int64_t>(1, std::min(budget_max(share), settings_.quantum_ns));
}

int64_t TokenScheduler::budget_at(const Seat& seat, const ComputeShare& share, TimeNs now,
                                  bool holding) const {
  const TimeNs elapsed = now - seat.budget_at;
  const int64_t accrued = elapsed * share.sm_percent / 100;
  // Held, the budget only falls: the bucket's top cannot be reached.
  if (holding) return seat.budget_ns + accrued - elapsed;
  return std::min(budget_max(share), seat.budget_ns + accrued);
}

TimeNs TokenScheduler::eligible_from(const Seat& seat, const ComputeShare& share) const {
  const int64_t missing = grant_threshold(share) - seat.budget_ns;
  if (missing <= 0) return seat.budget_at;
  return seat.budget_at + divide_up(missing * 100, share.sm_percent);
}

bool TokenScheduler::eligible(const Seat& seat, TimeNs now) const {
  const ComputeShare& share = seat.share;
  if (!has_hard_cap(share)) return true;
  // Forced and still draining, its budget falls as a holder's does.
  return budget_at(seat, share, now, seat.forced_at.has_value()) >= grant_threshold(share);
}

void TokenScheduler::charge_holder(Device& device, TimeNs now) {
  if (device.holder == kNoTenant || now <= device.charged_until) return;
  charge_held(device, device.seats[device.holder], now - device.charged_until, now);
  device.charged_until = now;
}

void TokenScheduler::charge_held(Device& device, Seat& seat, TimeNs held, TimeNs now) {
  const ComputeShare& share = seat.share;
  const ShareBranch& branch = seat.branch;
  charge_stride(seat.vtime, seat.vtime_remainder, held, share.weight);
  // The factors as of the hold's end, before it joins the history.
  const double user_factor = usage_factor(device, seat, true, now);
  const double group_factor = usage_factor(device, seat, false, now);
  charge_node(device.users[{branch.group, branch.user}], held, user_factor, now);
  charge_node(device.groups[branch.group], held, group_factor, now);
  raise_floors(device);
  if (has_hard_cap(share)) {
    seat.budget_ns = budget_at(seat, share, now, true);
    seat.budget_at = now;
  }
}

void TokenScheduler::settle_overrun(TenantNumber tenant, DeviceIndex index, Device& device,
                                    Seat& seat, TimeNs now) {
  const TimeNs overrun = now - *seat.forced_at;
  seat.forced_at.reset();
  if (overrun <= 0) return;
  // Not held since the forced release, which brought the budget up to then:
  // the time since counts as held, the bucket's top out of reach.
  charge_held(device, seat, overrun, now);
  counters_for(tenant, index).overrun_ns += overrun;
}

bool TokenScheduler::active(const Device& device, TenantNumber tenant, const Seat& seat) {
  return seat.wanting || tenant == device.holder;
}

template <typename Key>
const TokenScheduler::Node& TokenScheduler::node_of(const std::map<Key, Node>& nodes,
                                                    const Key& key) {
  static const Node kNeverActive{};
  const auto found = nodes.find(key);
  return found == nodes.end() ? kNeverActive : found->second;
}

void TokenScheduler::raise_floors(Device& device) {
  std::optional<int64_t> lowest_group;
  std::map<uint32_t, std::optional<int64_t>> lowest_user;   // by group
  std::map<UserKey, std::optional<int64_t>> lowest_tenant;  // by user
  for (const auto& [tenant, seat] : device.seats) {
    if (!active(device, tenant, seat)) continue;
    const UserKey user{seat.branch.group, seat.branch.user};
    lower_to(lowest_group, device.groups[user.first].vtime);
    lower_to(lowest_user[user.first], device.users[user].vtime);
    lower_to(lowest_tenant[user], seat.vtime);
  }
  if (lowest_group) device.groups_floor = std::max(device.groups_floor, *lowest_group);
  for (const auto& [group, lowest] : lowest_user) {
    Node& node = device.groups[group];
    node.children_floor = std::max(node.children_floor, *lowest);
  }
  for (const auto& [user, lowest] : lowest_tenant) {
    Node& node = device.users[user];
    node.children_floor = std::max(node.children_floor, *lowest);
  }
}

void TokenScheduler::charge_node(Node& node, TimeNs held, double factor, TimeNs now) {
  if (factor >= 1) {
    charge_stride(node.vtime, node.vtime_remainder, held, node.share);
  } else {
    node.vtime += std::llround(static_cast<double>(held) / (node.share * factor));
  }
  if (settings_.usage_half_life_ns > 0) {
    node.usage_ns = decayed_usage(node, now) + static_cast<double>(held);
    node.usage_at = now;
  }
}

double TokenScheduler::decayed_usage(const Node& node, TimeNs now) const {
  if (settings_.usage_half_life_ns <= 0 || node.usage_ns == 0) return node.usage_ns;
  const double half_lives =
      static_cast<double>(now - node.usage_at) / static_cast<double>(settings_.usage_half_life_ns);
  return node.usage_ns * std::exp2(-half_lives);
}

double TokenScheduler::usage_factor(const Device& device, const Seat& seat, bool users,
                                    TimeNs now) const {
  if (settings_.usage_half_life_ns <= 0) return 1;
  const ShareBranch& mine = seat.branch;
  // The members of the seat's level that want the device, the seat's own.
  std::set<uint32_t> members;
  for (const auto& [tenant, other] : device.seats) {
    if (!active(device, tenant, other) && &other != &seat) continue;
    if (users && other.branch.group != mine.group) continue;
    members.insert(users ? other.branch.user : other.branch.group);
  }
  if (members.size() < 2) return 1;  // nobody to be fair to
  double usage_total = 0, share_total = 0, my_usage = 0, my_share = 1;
  for (const uint32_t member : members) {
    const Node& node =
        users ? node_of(device.users, UserKey{mine.group, member}) : node_of(device.groups, member);
    const double usage = decayed_usage(node, now);
    usage_total += usage;
    share_total += node.share;
    if (member == (users ? mine.user : mine.group)) {
      my_usage = usage;
      my_share = node.share;
    }
  }
  if (usage_total <= 0) return 1;
  const double exponent = (my_usage / usage_total) / (my_share / share_total);
  return std::exp2(-std::min(exponent, kMaxUsageExponent));
}

void TokenScheduler::set_usage_half_life(TimeNs half_life_ns, TimeNs now) {
  if (half_life_ns == settings_.usage_half_life_ns) return;
  for (auto& [index, device] : devices_) {
    charge_holder(device, now);  // under the old factors
    const auto decay = [&](Node& node) {
      node.usage_ns = half_life_ns > 0 ? decayed_usage(node, now) : 0;
      node.usage_at = now;
    };
    for (auto& [group, node] : device.groups)
      decay(node);
    for (auto& [user, node] : device.users)
      decay(node);
  }
  settings_.usage_half_life_ns = std::max<TimeNs>(0, half_life_ns);
}

void TokenScheduler::mark_inactive(Device& device, Seat& seat, TimeNs now) {
  seat.active_until = now;
  device.groups[seat.branch.group].active_until = now;
  device.users[{seat.branch.group, seat.branch.user}].active_until = now;
}

void TokenScheduler::lift_vtime(Device& device, TenantNumber tenant, TimeNs now) {
  Seat& seat = device.seats[tenant];
  const ShareBranch& branch = seat.branch;
  bool group_active = false;
  bool user_active = false;
  std::optional<int64_t> lowest_group, lowest_user, lowest_tenant;
  for (const auto& [other, other_seat] : device.seats) {
    if (other == tenant || !active(device, other, other_seat)) continue;
    const ShareBranch& theirs = other_seat.branch;
    if (theirs.group != branch.group) {
      lower_to(lowest_group, node_of(device.groups, theirs.group).vtime);
    } else if (theirs.user != branch.user) {
      group_active = true;
      lower_to(lowest_user, node_of(device.users, UserKey{theirs.group, theirs.user}).vtime);
    } else {
      group_active = user_active = true;
      lower_to(lowest_tenant, other_seat.vtime);
    }
  }
  // Active within the last quantum: what it is owed from its last turn stays.
  const auto idle = [&](const std::optional<TimeNs>& active_until) {
    return !active_until || now - *active_until > settings_.quantum_ns;
  };
  Node& group = device.groups[branch.group];
  group.share = branch.group_share;
  if (!group_active) {
    if (idle(group.active_until))
      lift_to(group.vtime, group.vtime_remainder, lowest_group.value_or(device.groups_floor));
    group.active_order = ++want_counter_;
  }
  Node& user = device.users[{branch.group, branch.user}];
  user.share = branch.user_share;
  if (!user_active) {
    if (idle(user.active_until))
      lift_to(user.vtime, user.vtime_remainder, lowest_user.value_or(group.children_floor));
    user.active_order = ++want_counter_;
  }
  if (idle(seat.active_until))
    lift_to(seat.vtime, seat.vtime_remainder, lowest_tenant.value_or(user.children_floor));
}

std::pair<TokenScheduler::Standing, TokenScheduler::Standing> TokenScheduler::standings(
    const Device& device, const Seat& seat_a, const Seat& seat_b) const {
  const ShareBranch& a = seat_a.branch;
  const ShareBranch& b = seat_b.branch;
  if (a.group != b.group) {
    const Node& group_a = node_of(device.groups, a.group);
    const Node& group_b = node_of(device.groups, b.group);
    return {{group_a.vtime, group_a.active_order}, {group_b.vtime, group_b.active_order}};
  }
  if (a.user != b.user) {
    const Node& user_a = node_of(device.users, UserKey{a.group, a.user});
    const Node& user_b = node_of(device.users, UserKey{b.group, b.user});
    return {{user_a.vtime, user_a.active_order}, {user_b.vtime, user_b.active_order}};
  }
  return {{seat_a.vtime, seat_a.wanted_order}, {seat_b.vtime, seat_b.wanted_order}};
}

bool TokenScheduler::goes_before(const Device& device, const Seat& seat_a,
                                 const Seat& seat_b) const {
  const auto priority_a = static_cast<int32_t>(seat_a.share.priority);
  const auto priority_b = static_cast<int32_t>(seat_b.share.priority);
  if (priority_a != priority_b) return priority_a > priority_b;
  const auto [a, b] = standings(device, seat_a, seat_b);
  if (a.vtime != b.vtime) return a.vtime < b.vtime;
  return a.order < b.order;
}

bool TokenScheduler::keeps_token(const Device& device, const Seat& holder_seat,
                                 const Seat& waiter_seat) const {
  // Strictly ahead only: on a tie the waiter goes, so equals take turns.
  const auto priority_holder = static_cast<int32_t>(holder_seat.share.priority);
  const auto priority_waiter = static_cast<int32_t>(waiter_seat.share.priority);
  if (priority_holder != priority_waiter) return priority_holder > priority_waiter;
  const auto [holder, waiter] = standings(device, holder_seat, waiter_seat);
  return holder.vtime < waiter.vtime;
}

std::optional<TenantNumber> TokenScheduler::best_waiter(const Device& device, TimeNs now) const {
  std::optional<TenantNumber> best;
  const Seat* best_seat = nullptr;
  for (const auto& [tenant, seat] : device.seats) {
    if (!seat.wanting || tenant == device.holder || !eligible(seat, now)) continue;
    if (!best || goes_before(device, seat, *best_seat)) {
      best = tenant;
      best_seat = &seat;
    }
  }
  return best;
}

void TokenScheduler::grant(DeviceIndex index, Device& device, TenantNumber tenant, TimeNs now) {
  Seat& seat = device.seats[tenant];
  // An overrun not drained yet ends here: from now on the hold is charged.
  if (seat.forced_at) settle_overrun(tenant, index, device, seat, now);
  const ComputeShare& share = seat.share;
  if (has_hard_cap(share)) {
    seat.budget_ns = budget_at(seat, share, now, false);
    seat.budget_at = now;
  }
  TenantDeviceCounters& counters = counters_for(tenant, index);
  ++counters.grants;
  if (seat.wanting) {
    const TimeNs waited = now - seat.wanting_since;
    counters.wait_ns += waited;
    counters.waits.observe(waited);
  }
  seat.wanting = false;
  device.holder = tenant;
  device.revoked = false;
  device.holder_idle = false;
  device.granted_at = now;
  device.charged_until = now;
  device.quantum_end = kNever;
  changes_.push_back(TokenChange{TokenChange::Kind::kGrant, index, tenant});
}

void TokenScheduler::revoke(DeviceIndex index, Device& device, TokenChange::Reason reason,
                            TimeNs now) {
  device.revoked = true;
  device.revoked_at = now;
  ++counters_for(device.holder, index).revokes;
  changes_.push_back(TokenChange{TokenChange::Kind::kRevoke, index, device.holder, reason});
}

void TokenScheduler::release(DeviceIndex index, Device& device, TokenChange::Reason reason,
                             TimeNs now) {
  charge_holder(device, now);
  Seat& seat = device.seats[device.holder];
  const TimeNs held = now - device.granted_at;
  TenantDeviceCounters& counters = counters_for(device.holder, index);
  counters.held_ns += held;
  if (reason == TokenChange::Reason::kAckTimeout) {
    ++counters.overruns;
    // Its processes drain on: owed from now until they are done, or until
    // its next grant (an earlier overrun was settled at this hold's).
    seat.forced_at = now;
  }
  if (seat.wanting) seat.wanting_since = now;  // wanted it again while draining
  if (!seat.wanting) mark_inactive(device, seat, now);
  seat.recent_holds.push_back(Interval{device.granted_at, now});
  while (!seat.recent_holds.empty() &&
         seat.recent_holds.front().end < now - settings_.share_window_ns)
    seat.recent_holds.pop_front();
  changes_.push_back(TokenChange{TokenChange::Kind::kRelease, index, device.holder, reason, held});
  device.holder = kNoTenant;
  device.revoked = false;
  device.holder_idle = false;
  device.quantum_end = kNever;
}

void TokenScheduler::reconsider(DeviceIndex index, Device& device, TimeNs now) {
  for (;;) {
    if (device.holder == kNoTenant) {
      const std::optional<TenantNumber> next = best_waiter(device, now);
      if (!next) return;
      grant(index, device, *next, now);
      continue;  // the new holder's own conditions (contention, cap) below
    }
    if (device.revoked) {
      if (now - device.revoked_at < settings_.ack_timeout_ns) return;
      release(index, device, TokenChange::Reason::kAckTimeout, now);
      continue;
    }
    charge_holder(device, now);
    const Seat& seat = device.seats[device.holder];
    if (has_hard_cap(seat.share) && seat.budget_ns <= 0) {
      revoke(index, device, TokenChange::Reason::kCapSpent, now);
      return;
    }
    const std::optional<TenantNumber> waiter = best_waiter(device, now);
    if (!waiter) {
      device.quantum_end = kNever;  // alone: keeps the token, no quantum runs
      return;
    }
    if (device.quantum_end == kNever)
      device.quantum_end = std::max(device.granted_at + settings_.quantum_ns, now);
    if (device.holder_idle) {
      revoke(index, device, TokenChange::Reason::kIdle, now);
      return;
    }
    if (now < device.quantum_end) return;
    if (keeps_token(device, seat, device.seats[*waiter])) {
      // The holder would be picked again: no handoff, another quantum.
      device.quantum_end = now + settings_.quantum_ns;
      return;
    }
    revoke(index, device, TokenChange::Reason::kQuantumEnd, now);
    return;
  }
}

TimeNs TokenScheduler::device_deadline(const Device& device, TimeNs now) const {
  TimeNs earliest = kNever;
  if (device.holder != kNoTenant) {
    if (device.revoked) return device.revoked_at + settings_.ack_timeout_ns;
    earliest = device.quantum_end;
    const Seat& seat = device.seats.at(device.holder);
    const ComputeShare& share = seat.share;
    if (has_hard_cap(share)) {
      // Budget as of charged_until, falling at (100 - P) % of wall time.
      const int64_t budget = seat.budget_ns;
      const TimeNs spent_at =
          budget <= 0 ? device.charged_until
                      : device.charged_until + divide_up(budget * 100, 100 - share.sm_percent);
      earliest = std::min(earliest, spent_at);
    }
  }
  // A capped waiter whose budget grows back may take the free token, or
  // start contention for the holder's.
  for (const auto& [tenant, seat] : device.seats) {
    if (!seat.wanting || tenant == device.holder) continue;
    const ComputeShare& share = seat.share;
    // A forced one's budget falls until its late drain, an event.
    if (!has_hard_cap(share) || seat.forced_at) continue;
    const TimeNs from = eligible_from(seat, share);
    if (from > now) earliest = std::min(earliest, from);
  }
  return earliest;
}

}  // namespace gpulimit::server
