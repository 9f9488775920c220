#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>

#include "gpulimit/trace/analysis.h"
#include "gpulimit/trace/report_output.h"

namespace gpulimit::trace {
namespace {

constexpr std::string_view kNameHeader = "tenant / pid";
constexpr std::string_view kPidIndent = "  ";

// printf-style formatting into a string, leaving the stream's flags alone.
std::string seconds(std::int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", static_cast<double>(ns) / 1e9);
  return text;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", fraction * 100.0);
  return text;
}

void write_row(std::ostream& out, std::size_t name_width, std::string_view name,
               std::size_t kernels, std::int64_t busy_ns, double share) {
  char numbers[64];
  std::snprintf(numbers, sizeof numbers, "%8zu %12s %8s", kernels, seconds(busy_ns).c_str(),
                percent(share).c_str());
  out << "  " << name << std::string(name_width - name.size(), ' ') << numbers << '\n';
}

std::string describe(const KernelRecord& kernel) {
  return "pid " + std::to_string(kernel.pid) + " stream " + std::to_string(kernel.stream) + " [" +
         std::to_string(kernel.start_ns) + ", " + std::to_string(kernel.end_ns) + ") " +
         kernel.name + " (line " + std::to_string(kernel.line) + ")";
}

void write_overlaps(std::ostream& out, std::string_view title, const OverlapSummary& summary) {
  out << "  " << title << ": " << summary.count << '\n';
  for (const KernelOverlap& overlap : summary.examples) {
    out << "    " << describe(overlap.earlier) << " and " << describe(overlap.later) << ": "
        << overlap.overlap_ns << " ns\n";
  }
  if (summary.count > summary.examples.size()) {
    out << "    ... and " << summary.count - summary.examples.size() << " more\n";
  }
}

}  // namespace

void write_table(std::ostream& out, const Report& report) {
  const Window& window = report.window;
  out << "device " << report.device << ": window [" << window.from_ns << ", " << window.to_ns
      << ") ns, " << seconds(window.length_ns()) << " s\n";

  // Pids of a named tenant are listed, indented, under it.
  std::size_t name_width = kNameHeader.size();
  for (const TenantUsage& tenant : report.tenants) {
    name_width = std::max(name_width, tenant.name.size());
    if (!tenant.named) continue;
    for (const pid_t pid : tenant.pids) {
      name_width = std::max(name_width, kPidIndent.size() + 4 + std::to_string(pid).size());
    }
  }
  name_width += 2;

  out << "  " << kNameHeader << std::string(name_width - kNameHeader.size(), ' ')
      << " kernels        GPU s    share\n";
  for (const TenantUsage& tenant : report.tenants) {
    write_row(out, name_width, tenant.name, tenant.kernels, tenant.busy_ns, tenant.share);
    if (!tenant.named) continue;
    for (const pid_t pid : tenant.pids) {
      const PidUsage* usage = report.find(pid);
      write_row(out, name_width, std::string(kPidIndent) + "pid " + std::to_string(pid),
                usage ? usage->kernels : 0, usage ? usage->busy_ns : 0, usage ? usage->share : 0.0);
    }
  }
  write_row(out, name_width, "device busy", report.kernels, report.busy_ns, report.busy_fraction);

  write_overlaps(out, "overlaps between processes", report.overlaps);
  // Only worth a line when present: see Report::same_stream_overlaps.
  if (report.same_stream_overlaps.count > 0) {
    write_overlaps(out, "overlaps within one stream", report.same_stream_overlaps);
  }
}

std::ostream& operator<<(std::ostream& out, const Report& report) {
  write_table(out, report);
  return out;
}

}  // namespace gpulimit::trace
