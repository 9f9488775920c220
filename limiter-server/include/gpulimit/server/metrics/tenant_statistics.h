// What gpulimitd counts per tenant and device, for `gpulimit status` and the
// Prometheus metrics: token grants, revokes, forced handoffs, time spent
// waiting for the token, and how those waits were distributed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "gpulimit/server/scheduling/scheduling_types.h"

namespace gpulimit::server {

// Waits from a Want to the grant it led to, in buckets of upper bounds from
// 100 us to 10 s (about three per decade), as a Prometheus histogram needs
// them: cumulative counts are derived when rendered. A handoff costs tens of
// microseconds to a few milliseconds; a waiter behind several tenants waits
// a few quanta (tens to hundreds of ms); a capped tenant can wait seconds.
class WaitHistogram {
 public:
  static constexpr std::array<TimeNs, 15> kUpperBoundsNs = {
      100'000,     250'000,     500'000,       1'000'000,     2'500'000,
      5'000'000,   10'000'000,  25'000'000,    50'000'000,    100'000'000,
      250'000'000, 500'000'000, 1'000'000'000, 2'500'000'000, 10'000'000'000};

  void observe(TimeNs wait_ns);

  // Observations of at most kUpperBoundsNs[i] (and above the bound before it).
  uint64_t in_bucket(std::size_t i) const { return buckets_[i]; }
  // Observations above the last bound.
  uint64_t above_last() const { return above_last_; }
  uint64_t count() const { return count_; }
  TimeNs sum_ns() const { return sum_ns_; }

 private:
  std::array<uint64_t, kUpperBoundsNs.size()> buckets_{};
  uint64_t above_last_ = 0;
  uint64_t count_ = 0;
  TimeNs sum_ns_ = 0;
};

// One tenant on one device, since it first wanted the device.
struct TenantDeviceCounters {
  TimeNs held_ns = 0;     // token held, the running hold included
  TimeNs wait_ns = 0;     // wanting the token without holding it, the running wait included
  uint64_t grants = 0;    // times the token was granted to it
  uint64_t revokes = 0;   // times it was asked to give the token back
  uint64_t overruns = 0;  // ack timeouts: the token was taken back without its drain
  TimeNs overrun_ns = 0;  // after them: forced release to late drain, charged as held
  WaitHistogram waits;    // one observation per Want that ended in a grant
};

}  // namespace gpulimit::server
