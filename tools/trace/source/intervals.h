// Half-open intervals of time, and the kernels they were clipped from: the
// arithmetic behind busy time and overlap detection.
#pragma once

#include <cstdint>
#include <vector>

#include "gpulimit/trace/records.h"

namespace gpulimit::trace {

struct Interval {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;  // exclusive

  std::int64_t length_ns() const { return end_ns - start_ns; }
};

// A kernel that intersects the analysed window, and the part of it inside.
struct KernelInWindow {
  const KernelRecord* kernel = nullptr;
  Interval clipped;
};

// Time covered by at least one of the intervals: concurrent kernels count once.
std::int64_t union_length(std::vector<Interval> intervals);

}  // namespace gpulimit::trace
