#include "gpulimit/server/scheduling/share_targets.h"

#include <algorithm>
#include <array>

namespace gpulimit::server {
namespace {

double cap_fraction(const ComputeShare& share) {
  return has_hard_cap(share) ? share.sm_percent / 100.0 : 1.0;
}

// Splits `available` among the demands at `members` by weight, none above its
// cap; returns what was handed out.
double fill_class(const std::vector<ShareDemand>& demands, const std::vector<size_t>& members,
                  double available, std::vector<ShareTarget>& targets) {
  std::vector<size_t> open = members;
  double handed_out = 0;
  // Each round either fixes at least one capped tenant or settles everyone.
  while (!open.empty() && available > 0) {
    double weights = 0;
    for (const size_t i : open)
      weights += demands[i].share.weight;
    std::vector<size_t> still_open;
    double capped_total = 0;
    for (const size_t i : open) {
      const double fair = available * demands[i].share.weight / weights;
      const double cap = cap_fraction(demands[i].share);
      if (cap <= fair) {
        targets[i].fraction = cap;
        capped_total += cap;
      } else {
        still_open.push_back(i);
      }
    }
    if (still_open.size() == open.size()) {  // nobody capped: split what is left
      for (const size_t i : open) {
        targets[i].fraction = available * demands[i].share.weight / weights;
        handed_out += targets[i].fraction;
      }
      return handed_out;
    }
    handed_out += capped_total;
    available -= capped_total;
    open = std::move(still_open);
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
