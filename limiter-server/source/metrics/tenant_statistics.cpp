#include "gpulimit/server/metrics/tenant_statistics.h"

#include <algorithm>

namespace gpulimit::server {

void WaitHistogram::observe(TimeNs wait_ns) {
  wait_ns = std::max<TimeNs>(0, wait_ns);
  const auto bound = std::lower_bound(kUpperBoundsNs.begin(), kUpperBoundsNs.end(), wait_ns);
  if (bound == kUpperBoundsNs.end()) {
    ++above_last_;
  } else {
    ++buckets_[static_cast<std::size_t>(bound - kUpperBoundsNs.begin())];
  }
  ++count_;
  sum_ns_ += wait_ns;
}

}  // namespace gpulimit::server
