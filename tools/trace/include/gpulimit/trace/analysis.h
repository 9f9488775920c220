// What a trace says about one device over a window of time: how much of it
// each process and tenant used, how busy it was, and whether kernels of
// different processes ever ran at the same time (time-slicing forbids it).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/trace/records.h"

namespace gpulimit::trace {

// Half-open: [from_ns, to_ns).
struct Window {
  std::int64_t from_ns = 0;
  std::int64_t to_ns = 0;

  std::int64_t length_ns() const { return to_ns - from_ns; }
  bool operator==(const Window&) const = default;
};

// Tenant name -> its pids. A pid should belong to one tenant at most; one
// listed under several tenants is counted in each.
using TenantMap = std::map<std::string, std::set<pid_t>>;

// Every member of these structs has an initializer, so that designated
// initializers such as {.device = 0} compile cleanly under -Wextra.
struct AnalysisOptions {
  int device = 0;
  std::optional<std::int64_t> from_ns = {};  // default: start of the device's first kernel
  std::optional<std::int64_t> to_ns = {};    // default: end of the device's last kernel
  TenantMap tenants = {};                    // pids in no tenant each form a group of their own
  std::size_t max_overlap_examples = 8;
};

// Busy time is the union of intervals clipped to the window, so kernels that
// run concurrently (on different streams of one process) count once and a
// share never exceeds 1. Shares and fractions are of the window's length, and
// 0 when the window is empty.
//
// A kernel counts towards `kernels` when it intersects the window; a
// zero-length kernel counts when it lies in [from_ns, to_ns], so that the
// default window holds every kernel of the device.
struct PidUsage {
  pid_t pid = 0;
  std::size_t kernels = 0;
  std::int64_t busy_ns = 0;
  double share = 0.0;
};

struct TenantUsage {
  std::string name = {};         // the caller's name, or "pid N" for a pid in no tenant
  bool named = false;            // false: the group of one pid that was in no tenant
  std::vector<pid_t> pids = {};  // ascending; for a named tenant, every pid the caller gave
  std::size_t kernels = 0;
  std::int64_t busy_ns = 0;
  double share = 0.0;
};

struct KernelOverlap {
  KernelRecord earlier = {};  // the kernel that started first
  KernelRecord later = {};
  std::int64_t overlap_ns = 0;  // how long both ran, within the window
};

struct OverlapSummary {
  std::size_t count = 0;  // overlapping pairs of kernels
  // The first pairs in time, at most AnalysisOptions::max_overlap_examples.
  std::vector<KernelOverlap> examples = {};
};

struct Report {
  int device = 0;
  Window window = {};
  std::size_t kernels = 0;
  std::int64_t busy_ns = 0;
  double busy_fraction = 0.0;
  std::vector<PidUsage> pids = {};        // ascending pid; only pids with kernels in the window
  std::vector<TenantUsage> tenants = {};  // named tenants by name, then unassigned pids by pid

  // Kernels of different processes running at once: what time-slicing must
  // prevent. Kernels that merely touch (one ends when the other starts) do
  // not overlap.
  OverlapSummary overlaps = {};
  // Kernels of one stream of one process running at once: the simulator
  // serialises a stream, so there this is a simulator bug. On a real GPU the
  // kernels of one CUDA graph, or programmatic dependent launches, can
  // legitimately overlap on one stream. Kernels of one process on different
  // streams may overlap and are not reported at all.
  OverlapSummary same_stream_overlaps = {};

  // nullptr / 0 for a pid or tenant absent from the report.
  const PidUsage* find(pid_t pid) const;
  const TenantUsage* find_tenant(std::string_view name) const;
  double share_of(pid_t pid) const;
  double share_of_tenant(std::string_view name) const;
};

// An explicit window with to < from is treated as empty.
Report analyze(const Trace& trace, const AnalysisOptions& options);

// The devices that appear in the trace, ascending.
std::vector<int> devices(const Trace& trace);

}  // namespace gpulimit::trace
