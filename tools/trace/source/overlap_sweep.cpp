#include "overlap_sweep.h"

#include <algorithm>
#include <map>
#include <utility>

namespace gpulimit::trace {
namespace {

// Kernels still running at the sweep position, earliest end first.
using RunningKernels = std::multimap<std::int64_t, const KernelInWindow*>;

template <typename Key>
std::size_t count_of(const std::map<Key, std::size_t>& counts, const Key& key) {
  const auto found = counts.find(key);
  return found == counts.end() ? 0 : found->second;
}

template <typename Key>
void decrement(std::map<Key, std::size_t>& counts, const Key& key) {
  const auto found = counts.find(key);
  if (--found->second == 0) counts.erase(found);
}

// `new_pairs` is known from the counters; the running set is walked only
// while examples are still wanted, which keeps a trace with many concurrent
// streams from costing a pass per kernel.
template <typename Matches>
void record_overlaps(OverlapSummary& summary, std::size_t new_pairs, const KernelInWindow& later,
                     const RunningKernels& running, std::size_t max_examples, Matches matches) {
  summary.count += new_pairs;
  std::size_t found = 0;
  for (const auto& [end_ns, earlier] : running) {
    if (found == new_pairs || summary.examples.size() >= max_examples) return;
    if (!matches(*earlier->kernel)) continue;
    summary.examples.push_back(KernelOverlap{
        .earlier = *earlier->kernel,
        .later = *later.kernel,
        .overlap_ns = std::min(end_ns, later.clipped.end_ns) - later.clipped.start_ns,
    });
    ++found;
  }
}

}  // namespace

OverlapFindings find_overlaps(std::span<const KernelInWindow> kernels, std::size_t max_examples) {
  using StreamKey = std::pair<pid_t, std::uint64_t>;
  OverlapFindings findings;
  RunningKernels running;
  std::map<pid_t, std::size_t> running_per_pid;
  std::map<StreamKey, std::size_t> running_per_stream;

  for (const KernelInWindow& current : kernels) {
    if (current.clipped.length_ns() == 0) continue;
    // A kernel that ended exactly when this one starts merely touches it.
    while (!running.empty() && running.begin()->first <= current.clipped.start_ns) {
      const KernelRecord& done = *running.begin()->second->kernel;
      decrement(running_per_pid, done.pid);
      decrement(running_per_stream, StreamKey{done.pid, done.stream});
      running.erase(running.begin());
    }

    const pid_t pid = current.kernel->pid;
    const StreamKey stream{pid, current.kernel->stream};
    record_overlaps(findings.between_processes, running.size() - count_of(running_per_pid, pid),
                    current, running, max_examples,
                    [pid](const KernelRecord& other) { return other.pid != pid; });
    record_overlaps(findings.within_stream, count_of(running_per_stream, stream), current, running,
                    max_examples, [&stream](const KernelRecord& other) {
                      return StreamKey{other.pid, other.stream} == stream;
                    });

    running.emplace(current.clipped.end_ns, &current);
    ++running_per_pid[pid];
    ++running_per_stream[stream];
  }
  return findings;
}

}  // namespace gpulimit::trace
