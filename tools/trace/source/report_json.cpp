#include <charconv>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>

#include "gpulimit/trace/analysis.h"
#include "gpulimit/trace/report_output.h"

namespace gpulimit::trace {
namespace {

// Written by hand to keep the library free of a JSON dependency; the only
// values that need care are strings (kernel and tenant names) and doubles.
std::string json_string(std::string_view text) {
  std::string quoted = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        quoted += "\\\"";
        break;
      case '\\':
        quoted += "\\\\";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned char>(c));
          quoted += escape;
        } else {
          quoted += c;
        }
    }
  }
  return quoted + "\"";
}

// Shortest text that reads back as the same double, independent of locale.
std::string json_number(double value) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return error == std::errc{} ? std::string(text, end) : std::string("0");
}

void write_kernel(std::ostream& out, const KernelRecord& kernel) {
  out << "{\"pid\": " << kernel.pid << ", \"device\": " << kernel.device
      << ", \"stream\": " << kernel.stream << ", \"start_ns\": " << kernel.start_ns
      << ", \"end_ns\": " << kernel.end_ns << ", \"name\": " << json_string(kernel.name)
      << ", \"line\": " << kernel.line << "}";
}

void write_overlaps(std::ostream& out, std::string_view key, const OverlapSummary& summary) {
  out << "      " << json_string(key) << ": {\"count\": " << summary.count << ", \"examples\": [";
  const char* separator = "\n";
  for (const KernelOverlap& overlap : summary.examples) {
    out << separator << "        {\"overlap_ns\": " << overlap.overlap_ns << ", \"earlier\": ";
    write_kernel(out, overlap.earlier);
    out << ", \"later\": ";
    write_kernel(out, overlap.later);
    out << "}";
    separator = ",\n";
  }
  out << (summary.examples.empty() ? "]}" : "\n      ]}");
}

void write_tenant(std::ostream& out, const TenantUsage& tenant) {
  out << "{\"name\": " << json_string(tenant.name)
      << ", \"named\": " << (tenant.named ? "true" : "false") << ", \"pids\": [";
  const char* separator = "";
  for (const pid_t pid : tenant.pids) {
    out << separator << pid;
    separator = ", ";
  }
  out << "], \"kernels\": " << tenant.kernels << ", \"busy_ns\": " << tenant.busy_ns
      << ", \"share\": " << json_number(tenant.share) << "}";
}

void write_pid(std::ostream& out, const PidUsage& usage) {
  out << "{\"pid\": " << usage.pid << ", \"kernels\": " << usage.kernels
      << ", \"busy_ns\": " << usage.busy_ns << ", \"share\": " << json_number(usage.share) << "}";
}

// `write_item(out, element)` for each element, one per line.
template <typename Range, typename WriteItem>
void write_array(std::ostream& out, std::string_view key, const Range& items,
                 WriteItem write_item) {
  out << "      " << json_string(key) << ": [";
  const char* separator = "\n";
  for (const auto& item : items) {
    out << separator << "        ";
    write_item(out, item);
    separator = ",\n";
  }
  out << (items.empty() ? "]" : "\n      ]");
}

void write_report(std::ostream& out, const Report& report) {
  out << "    {\n"
      << "      \"device\": " << report.device << ",\n"
      << "      \"window\": {\"from_ns\": " << report.window.from_ns
      << ", \"to_ns\": " << report.window.to_ns << "},\n"
      << "      \"kernels\": " << report.kernels << ",\n"
      << "      \"busy_ns\": " << report.busy_ns << ",\n"
      << "      \"busy_fraction\": " << json_number(report.busy_fraction) << ",\n";
  write_array(out, "tenants", report.tenants, write_tenant);
  out << ",\n";
  write_array(out, "pids", report.pids, write_pid);
  out << ",\n";
  write_overlaps(out, "overlaps", report.overlaps);
  out << ",\n";
  write_overlaps(out, "same_stream_overlaps", report.same_stream_overlaps);
  out << "\n    }";
}

}  // namespace

void write_json(std::ostream& out, std::span<const Report> reports) {
  out << "{\n  \"devices\": [";
  const char* separator = "\n";
  for (const Report& report : reports) {
    out << separator;
    write_report(out, report);
    separator = ",\n";
  }
  out << (reports.empty() ? "]\n}\n" : "\n  ]\n}\n");
}

}  // namespace gpulimit::trace
