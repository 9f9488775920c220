#include "usage/usage_command.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/help_text.h"
#include "gpulimit/usage/usage_database.h"
#include "status/status_table.h"

namespace gpulimit::cli {

namespace {

const char* key_name(usage::GroupBy by) {
  switch (by) {
    case usage::GroupBy::kUser:
      return "user";
    case usage::GroupBy::kGroup:
      return "group";
    case usage::GroupBy::kTenant:
      return "tenant";
  }
  return "?";
}

std::string fixed(double value, int decimals) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(decimals) << value;
  return out.str();
}

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text)
    quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string render_table(const std::vector<usage::UsageLine>& lines, const UsageOptions& options) {
  std::string key = key_name(options.by);
  for (char& c : key)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  size_t width = key.size();
  for (const usage::UsageLine& line : lines)
    width = std::max(width, line.key.size());
  std::ostringstream out;
  out << std::left << std::setw(static_cast<int>(width)) << key << std::right << "  "
      << std::setw(7) << "TENANTS"
      << "  " << std::setw(7) << "RUNNING"
      << "  " << std::setw(10) << "GPU-HOURS"
      << "  " << std::setw(10) << "GIB-HOURS"
      << "  " << std::setw(8) << "PEAK"
      << "  " << std::setw(6) << "OOM"
      << "\n";
  for (const usage::UsageLine& line : lines)
    out << std::left << std::setw(static_cast<int>(width)) << line.key << std::right << "  "
        << std::setw(7) << line.tenants << "  " << std::setw(7) << line.running << "  "
        << std::setw(10) << fixed(line.gpu_seconds / 3600, 4) << "  " << std::setw(10)
        << fixed(line.gib_hours, 4) << "  " << std::setw(8) << format_bytes(line.peak_bytes) << "  "
        << std::setw(6) << line.oom_denials << "\n";
  if (lines.empty())
    out << "(no tenant recorded" << (options.since_ns ? " since then" : "") << ")\n";
  return out.str();
}

}  // namespace

std::string render_usage(const std::vector<usage::UsageLine>& lines, const UsageOptions& options) {
  switch (options.format) {
    case UsageFormat::kTable:
      return render_table(lines, options);
    case UsageFormat::kCsv: {
      std::string text = std::string(key_name(options.by)) +
                         ",tenants,running,gpu_hours,gib_hours,peak_bytes,oom_denials\n";
      for (const usage::UsageLine& line : lines)
        text += csv_field(line.key) + "," + std::to_string(line.tenants) + "," +
                std::to_string(line.running) + "," + fixed(line.gpu_seconds / 3600, 6) + "," +
                fixed(line.gib_hours, 6) + "," + std::to_string(line.peak_bytes) + "," +
                std::to_string(line.oom_denials) + "\n";
      return text;
    }
    case UsageFormat::kJson: {
      nlohmann::ordered_json report;
      report["database"] = options.database;
      report["since"] = options.since_ns ? nlohmann::ordered_json(options.since_ns / 1'000'000'000)
                                         : nlohmann::ordered_json(nullptr);
      report["by"] = key_name(options.by);
      report["lines"] = nlohmann::ordered_json::array();
      for (const usage::UsageLine& line : lines)
        report["lines"].push_back({{key_name(options.by), line.key},
                                   {"tenants", line.tenants},
                                   {"running", line.running},
                                   {"gpu_hours", line.gpu_seconds / 3600},
                                   {"gib_hours", line.gib_hours},
                                   {"peak_bytes", line.peak_bytes},
                                   {"oom_denials", line.oom_denials}});
      return report.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    }
  }
  return {};
}

int run_usage(const std::vector<std::string_view>& args, char* const*) {
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  UsageOptions options;
  std::string error;
  if (!parse_usage_arguments(args, now_ns, options, error)) {
    std::fprintf(stderr, "gpulimit %s\n", error.c_str());
    return kExitUsageUsage;
  }
  if (options.help) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  std::unique_ptr<usage::UsageDatabase> database =
      usage::UsageDatabase::open_for_reading(options.database, error);
  std::vector<usage::TenantUsage> records;
  if (!database || !database->load(options.since_ns, records, error)) {
    std::fprintf(stderr, "gpulimit usage: %s\n", error.c_str());
    return kExitNoDatabase;
  }
  const std::string text = render_usage(usage::summarize(records, options.by), options);
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace gpulimit::cli
