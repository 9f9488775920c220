#include "intervals.h"

#include <algorithm>
#include <limits>

namespace gpulimit::trace {

std::int64_t union_length(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
  std::int64_t covered = 0;
  // The end of the merged run so far; nothing before it is counted twice.
  std::int64_t reach = std::numeric_limits<std::int64_t>::min();
  for (const Interval& interval : intervals) {
    const std::int64_t start = std::max(interval.start_ns, reach);
    if (interval.end_ns > start) {
      covered += interval.end_ns - start;
      reach = interval.end_ns;
    }
  }
  return covered;
}

}  // namespace gpulimit::trace
