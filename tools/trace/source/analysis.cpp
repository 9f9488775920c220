#include "gpulimit/trace/analysis.h"

#include <algorithm>
#include <tuple>

#include "intervals.h"
#include "overlap_sweep.h"

namespace gpulimit::trace {
namespace {

// The caller's bounds, or the span of the device's kernels.
Window resolve_window(const std::vector<const KernelRecord*>& on_device,
                      const AnalysisOptions& options) {
  Window window;
  if (!on_device.empty()) {
    window.from_ns = on_device.front()->start_ns;
    window.to_ns = on_device.front()->end_ns;
    for (const KernelRecord* kernel : on_device) {
      window.from_ns = std::min(window.from_ns, kernel->start_ns);
      window.to_ns = std::max(window.to_ns, kernel->end_ns);
    }
  }
  if (options.from_ns) window.from_ns = *options.from_ns;
  if (options.to_ns) window.to_ns = *options.to_ns;
  window.to_ns = std::max(window.to_ns, window.from_ns);
  return window;
}

bool counts_in(const KernelRecord& kernel, const Window& window) {
  if (kernel.start_ns == kernel.end_ns) {
    return window.from_ns <= kernel.start_ns && kernel.start_ns <= window.to_ns;
  }
  return kernel.start_ns < window.to_ns && kernel.end_ns > window.from_ns;
}

double fraction_of(std::int64_t busy_ns, const Window& window) {
  return window.length_ns() > 0
             ? static_cast<double>(busy_ns) / static_cast<double>(window.length_ns())
             : 0.0;
}

struct PidKernels {
  std::size_t kernels = 0;
  std::vector<Interval> intervals;
};

TenantUsage named_tenant_usage(const std::string& name, const std::set<pid_t>& pids,
                               const std::map<pid_t, PidKernels>& by_pid, const Window& window) {
  TenantUsage usage{.name = name, .named = true, .pids = {pids.begin(), pids.end()}};
  std::vector<Interval> intervals;
  for (const pid_t pid : pids) {
    const auto found = by_pid.find(pid);
    if (found == by_pid.end()) continue;
    usage.kernels += found->second.kernels;
    intervals.insert(intervals.end(), found->second.intervals.begin(),
                     found->second.intervals.end());
  }
  usage.busy_ns = union_length(std::move(intervals));
  usage.share = fraction_of(usage.busy_ns, window);
  return usage;
}

}  // namespace

Report analyze(const Trace& trace, const AnalysisOptions& options) {
  std::vector<const KernelRecord*> on_device;
  for (const KernelRecord& kernel : trace.kernels) {
    if (kernel.device == options.device) on_device.push_back(&kernel);
  }

  Report report{.device = options.device, .window = resolve_window(on_device, options)};
  const Window& window = report.window;

  std::vector<KernelInWindow> in_window;
  for (const KernelRecord* kernel : on_device) {
    if (!counts_in(*kernel, window)) continue;
    in_window.push_back(KernelInWindow{
        .kernel = kernel,
        .clipped = {std::max(kernel->start_ns, window.from_ns),
                    std::min(kernel->end_ns, window.to_ns)},
    });
  }
  // Trace promises start order, but a caller may have built the trace by
  // hand, and clipping ties every kernel that began before the window.
  std::sort(in_window.begin(), in_window.end(),
            [](const KernelInWindow& a, const KernelInWindow& b) {
              return std::tie(a.clipped.start_ns, a.kernel->start_ns, a.kernel->line) <
                     std::tie(b.clipped.start_ns, b.kernel->start_ns, b.kernel->line);
            });

  std::map<pid_t, PidKernels> by_pid;
  std::vector<Interval> all_intervals;
  for (const KernelInWindow& kernel : in_window) {
    PidKernels& pid_kernels = by_pid[kernel.kernel->pid];
    ++pid_kernels.kernels;
    pid_kernels.intervals.push_back(kernel.clipped);
    all_intervals.push_back(kernel.clipped);
  }

  report.kernels = in_window.size();
  report.busy_ns = union_length(std::move(all_intervals));
  report.busy_fraction = fraction_of(report.busy_ns, window);

  for (const auto& [pid, pid_kernels] : by_pid) {
    const std::int64_t busy_ns = union_length(pid_kernels.intervals);
    report.pids.push_back(PidUsage{.pid = pid,
                                   .kernels = pid_kernels.kernels,
                                   .busy_ns = busy_ns,
                                   .share = fraction_of(busy_ns, window)});
  }

  std::set<pid_t> assigned;
  for (const auto& [name, pids] : options.tenants) {
    report.tenants.push_back(named_tenant_usage(name, pids, by_pid, window));
    assigned.insert(pids.begin(), pids.end());
  }
  for (const PidUsage& usage : report.pids) {
    if (assigned.contains(usage.pid)) continue;
    report.tenants.push_back(TenantUsage{.name = "pid " + std::to_string(usage.pid),
                                         .named = false,
                                         .pids = {usage.pid},
                                         .kernels = usage.kernels,
                                         .busy_ns = usage.busy_ns,
                                         .share = usage.share});
  }

  OverlapFindings overlaps = find_overlaps(in_window, options.max_overlap_examples);
  report.overlaps = std::move(overlaps.between_processes);
  report.same_stream_overlaps = std::move(overlaps.within_stream);
  return report;
}

std::vector<int> devices(const Trace& trace) {
  std::set<int> seen;
  for (const KernelRecord& kernel : trace.kernels) {
    seen.insert(kernel.device);
  }
  return {seen.begin(), seen.end()};
}

const PidUsage* Report::find(pid_t pid) const {
  const auto found = std::find_if(pids.begin(), pids.end(),
                                  [pid](const PidUsage& usage) { return usage.pid == pid; });
  return found == pids.end() ? nullptr : &*found;
}

const TenantUsage* Report::find_tenant(std::string_view name) const {
  const auto found = std::find_if(tenants.begin(), tenants.end(),
                                  [name](const TenantUsage& usage) { return usage.name == name; });
  return found == tenants.end() ? nullptr : &*found;
}

double Report::share_of(pid_t pid) const {
  const PidUsage* usage = find(pid);
  return usage ? usage->share : 0.0;
}

double Report::share_of_tenant(std::string_view name) const {
  const TenantUsage* usage = find_tenant(name);
  return usage ? usage->share : 0.0;
}

}  // namespace gpulimit::trace
