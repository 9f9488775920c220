#include "gpulimit/server/scheduling/share_targets.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

namespace gpulimit::server {
namespace {

double cap_fraction(const ComputeShare& share) {
  return has_hard_cap(share) ? share.sm_percent / 100.0 : 1.0;
}

// One of the claims water filling splits a level's time between.
struct Claim {
  double weight = 1;
  double cap = 1;  // the most it can take, 0 to 1
};

// Splits `available` between `claims` by weight, none above its cap, what a
// cap leaves going to the others; each claim's part, in order.
std::vector<double> water_fill(const std::vector<Claim>& claims, double available) {
  std::vector<double> parts(claims.size(), 0);
  std::vector<size_t> open(claims.size());
  for (size_t i = 0; i < open.size(); ++i)
    open[i] = i;
  // Each round either fixes at least one capped claim or settles everyone.
  while (!open.empty() && available > 0) {
    double weights = 0;
    for (const size_t i : open)
      weights += claims[i].weight;
    std::vector<size_t> still_open;
    double capped_total = 0;
    for (const size_t i : open) {
      if (claims[i].cap <= available * claims[i].weight / weights) {
        parts[i] = claims[i].cap;
        capped_total += claims[i].cap;
      } else {
        still_open.push_back(i);
      }
    }
    if (still_open.size() == open.size()) {  // nobody capped: split what is left
      for (const size_t i : open)
        parts[i] = available * claims[i].weight / weights;
      return parts;
    }
    available -= capped_total;
    open = std::move(still_open);
  }
  return parts;
}

// The members of one class, grouped as the fair-share tree groups them.
using UserKey = std::pair<uint32_t, uint32_t>;  // group, user
struct ClassTree {
  std::map<uint32_t, std::vector<UserKey>> users_of_group;
  std::map<UserKey, std::vector<size_t>> tenants_of_user;  // indices of demands
};

// Splits `available` within one class; returns what was handed out.
double fill_class(const std::vector<ShareDemand>& demands, const std::vector<size_t>& members,
                  double available, std::vector<ShareTarget>& targets) {
  ClassTree tree;
  for (const size_t i : members) {
    const UserKey user{demands[i].branch.group, demands[i].branch.user};
    std::vector<size_t>& tenants = tree.tenants_of_user[user];
    if (tenants.empty()) tree.users_of_group[user.first].push_back(user);
    tenants.push_back(i);
  }
  // Caps add up from the tenants; the shares are those of the branch.
  const auto user_cap = [&](const UserKey& user) {
    double cap = 0;
    for (const size_t i : tree.tenants_of_user.at(user))
      cap += cap_fraction(demands[i].share);
    return std::min(cap, 1.0);
  };
  const auto group_cap = [&](uint32_t group) {
    double cap = 0;
    for (const UserKey& user : tree.users_of_group.at(group))
      cap += user_cap(user);
    return std::min(cap, 1.0);
  };

  std::vector<uint32_t> groups;
  std::vector<Claim> group_claims;
  for (const auto& [group, users] : tree.users_of_group) {
    const size_t first = tree.tenants_of_user.at(users.front()).front();
    groups.push_back(group);
    group_claims.push_back(
        {demands[first].branch.group_share * demands[first].group_factor, group_cap(group)});
  }
  const std::vector<double> group_parts = water_fill(group_claims, available);
  double handed_out = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<UserKey>& users = tree.users_of_group.at(groups[g]);
    std::vector<Claim> user_claims;
    for (const UserKey& user : users) {
      const size_t first = tree.tenants_of_user.at(user).front();
      user_claims.push_back(
          {demands[first].branch.user_share * demands[first].user_factor, user_cap(user)});
    }
    const std::vector<double> user_parts = water_fill(user_claims, group_parts[g]);
    for (size_t u = 0; u < users.size(); ++u) {
      const std::vector<size_t>& tenants = tree.tenants_of_user.at(users[u]);
      std::vector<Claim> tenant_claims;
      for (const size_t i : tenants)
        tenant_claims.push_back(
            {static_cast<double>(demands[i].share.weight), cap_fraction(demands[i].share)});
      const std::vector<double> tenant_parts = water_fill(tenant_claims, user_parts[u]);
      for (size_t t = 0; t < tenants.size(); ++t) {
        targets[tenants[t]].fraction = tenant_parts[t];
        handed_out += tenant_parts[t];
      }
    }
  }
  return handed_out;
}

}  // namespace

std::vector<ShareTarget> share_targets(const std::vector<ShareDemand>& demands) {
  std::vector<ShareTarget> targets(demands.size());
  for (size_t i = 0; i < demands.size(); ++i)
    targets[i].tenant = demands[i].tenant;
  double available = 1.0;
  constexpr std::array kClassesFirstToLast = {
      protocol::Priority::kHigh, protocol::Priority::kNormal, protocol::Priority::kLow};
  for (const protocol::Priority priority : kClassesFirstToLast) {
    std::vector<size_t> members;
    for (size_t i = 0; i < demands.size(); ++i)
      if (demands[i].share.priority == priority) members.push_back(i);
    available -= fill_class(demands, members, available, targets);
    available = std::max(available, 0.0);
  }
  return targets;
}

}  // namespace gpulimit::server
