// The target shares the scheduling rules give under a given demand.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "gpulimit/server/scheduling/share_targets.h"

namespace gpulimit::server {
namespace {

using protocol::Priority;

// Tenants in one group and user, as a server without policy has them.
std::vector<double> fractions(const std::vector<std::pair<TenantNumber, ComputeShare>>& tenants) {
  std::vector<ShareDemand> demands;
  for (const auto& [tenant, share] : tenants) {
    ShareDemand& demand = demands.emplace_back();
    demand.tenant = tenant;
    demand.share = share;
  }
  std::vector<double> out;
  for (const ShareTarget& target : share_targets(demands))
    out.push_back(target.fraction);
  return out;
}

TEST(ShareTargets, WeightsSplitTheDevice) {
  const auto sut = fractions({{1, {0, 1, Priority::kNormal}}, {2, {0, 3, Priority::kNormal}}});

  EXPECT_DOUBLE_EQ(sut[0], 0.25);
  EXPECT_DOUBLE_EQ(sut[1], 0.75);
}

TEST(ShareTargets, ACapIsAMaximumAndWhatItLeavesGoesToTheOthers) {
  const auto sut = fractions({{1, {10, 5, Priority::kNormal}},
                              {2, {0, 1, Priority::kNormal}},
                              {3, {0, 1, Priority::kNormal}}});

  EXPECT_DOUBLE_EQ(sut[0], 0.10);
  EXPECT_DOUBLE_EQ(sut[1], 0.45);
  EXPECT_DOUBLE_EQ(sut[2], 0.45);
}

TEST(ShareTargets, ALoneCappedTenantGetsItsCapAndNoMore) {
  EXPECT_DOUBLE_EQ(fractions({{1, {40, 1, Priority::kNormal}}})[0], 0.40);
}

TEST(ShareTargets, HigherPriorityComesFirst) {
  const auto sut = fractions(
      {{1, {0, 1, Priority::kLow}}, {2, {30, 1, Priority::kHigh}}, {3, {0, 1, Priority::kNormal}}});

  EXPECT_DOUBLE_EQ(sut[1], 0.30);
  EXPECT_DOUBLE_EQ(sut[2], 0.70);
  EXPECT_DOUBLE_EQ(sut[0], 0.0);
}

}  // namespace
}  // namespace gpulimit::server
