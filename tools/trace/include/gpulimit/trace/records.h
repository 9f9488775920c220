// One executed kernel as a trace line records it, and a whole trace. The line
// format is described in trace.h.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gpulimit::trace {

struct KernelRecord {
  pid_t pid = 0;
  int device = 0;             // physical index, not CUDA_VISIBLE_DEVICES-relative
  std::uint64_t stream = 0;   // unique within its process only
  std::int64_t start_ns = 0;  // CLOCK_MONOTONIC
  std::int64_t end_ns = 0;    // >= start_ns
  std::string name = {};
  std::size_t line = 0;  // 1-based line in the trace, so a report can point back at it

  std::int64_t duration_ns() const { return end_ns - start_ns; }
  bool operator==(const KernelRecord&) const = default;
};

struct Trace {
  // Ordered by start_ns, then end_ns, then line: writers append concurrently,
  // so file order means nothing, and a total order keeps reports reproducible.
  std::vector<KernelRecord> kernels = {};
};

}  // namespace gpulimit::trace
