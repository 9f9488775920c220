// Finds kernels that ran at the same time on one device, in one pass over
// the kernels in start order.
#pragma once

#include <cstddef>
#include <span>

#include "gpulimit/trace/analysis.h"
#include "intervals.h"

namespace gpulimit::trace {

struct OverlapFindings {
  OverlapSummary between_processes;
  OverlapSummary within_stream;
};

// `kernels`: one device's kernels in the window, ordered by clipped start.
// Overlaps are measured on the clipped intervals, so only time inside the
// window counts; zero-length kernels overlap nothing.
OverlapFindings find_overlaps(std::span<const KernelInWindow> kernels, std::size_t max_examples);

}  // namespace gpulimit::trace
