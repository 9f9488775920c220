// Tenants that always want a device, for the scheduler's unit tests: the
// rules driven with made-up times, no clock, no sleeping.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "gpulimit/server/scheduling/token_scheduler.h"

namespace gpulimit::server {

inline constexpr DeviceIndex kGpu = 0;

// Tenants that always want the device: each drains `drain` after a revoke
// and wants the token again as soon as it lost it. Counts what each held.
class BusyTenants {
 public:
  BusyTenants(TokenScheduler& sut, TimeNs drain) : sut_(sut), drain_(drain) {}

  void start(const std::map<TenantNumber, ComputeShare>& tenants) {
    for (const auto& [tenant, share] : tenants)
      sut_.add_tenant(tenant, share);
    for (const auto& [tenant, share] : tenants)
      sut_.set_wanting(tenant, kGpu, true, now_);
    collect();
  }
  // Tenants in the fair-share tree: each with its share and branch.
  void start(const std::map<TenantNumber, std::pair<ComputeShare, ShareBranch>>& tenants) {
    for (const auto& [tenant, placed] : tenants)
      sut_.add_tenant(tenant, placed.first, placed.second);
    for (const auto& [tenant, placed] : tenants)
      sut_.set_wanting(tenant, kGpu, true, now_);
    collect();
  }
  // The tenant stops wanting: once it has lost the token (if it holds it)
  // it wants it no more.
  void stop(TenantNumber tenant) {
    stopped_.insert(tenant);
    sut_.set_wanting(tenant, kGpu, false, now_);
    collect();
  }
  // The tenant's processes leave the device, now.
  void leave(TenantNumber tenant) {
    stopped_.insert(tenant);
    sut_.leave_device(tenant, kGpu, now_);
    collect();
  }
  // One more tenant, wanting from now on.
  void join(TenantNumber tenant, const ComputeShare& share, const ShareBranch& branch) {
    sut_.add_tenant(tenant, share, branch);
    sut_.set_wanting(tenant, kGpu, true, now_);
    collect();
  }

  void run_until(TimeNs end) {
    for (;;) {
      if (drain_at_ && *drain_at_ <= now_) {
        drain_at_.reset();
        sut_.holder_drained(draining_, kGpu, now_);
        collect();
        continue;
      }
      if (now_ >= end) break;
      TimeNs next = end;
      if (const auto deadline = sut_.next_deadline(now_)) {
        ASSERT_GT(*deadline, now_) << "a deadline that does not move time forward";
        next = std::min(next, *deadline);
      }
      if (drain_at_) next = std::min(next, *drain_at_);
      now_ = next;
      sut_.advance(now_);
      collect();
    }
  }

  // Ended holds, and the running one up to now.
  TimeNs held(TenantNumber t) const {
    const TimeNs running = sut_.holder(kGpu) == t ? now_ - granted_at_ : 0;
    return (held_.contains(t) ? held_.at(t) : 0) + running;
  }
  int grants(TenantNumber t) const { return grants_.contains(t) ? grants_.at(t) : 0; }
  TimeNs now() const { return now_; }

 private:
  void collect() {
    for (const TokenChange& change : sut_.take_changes()) {
      switch (change.kind) {
        case TokenChange::Kind::kGrant:
          granted_at_ = now_;
          ++grants_[change.tenant];
          break;
        case TokenChange::Kind::kRevoke:
          draining_ = change.tenant;
          drain_at_ = now_ + drain_;
          break;
        case TokenChange::Kind::kRelease:
          held_[change.tenant] += change.held_ns;
          if (!stopped_.contains(change.tenant)) sut_.set_wanting(change.tenant, kGpu, true, now_);
          break;
      }
    }
  }

  TokenScheduler& sut_;
  TimeNs drain_;
  TimeNs now_ = 0;
  TimeNs granted_at_ = 0;
  TenantNumber draining_ = kNoTenant;
  std::optional<TimeNs> drain_at_;
  std::map<TenantNumber, TimeNs> held_;
  std::map<TenantNumber, int> grants_;
  std::set<TenantNumber> stopped_;
};

}  // namespace gpulimit::server
