#include "usage/usage_command_line.h"

#include <charconv>
#include <ctime>

namespace gpulimit::cli {

namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;

// The digits of `text` from `at`, exactly `count` of them; -1 otherwise.
int digits(std::string_view text, size_t at, size_t count) {
  if (at + count > text.size()) return -1;
  int value = 0;
  for (size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

int64_t parse_age(std::string_view text, int64_t now_ns) {
  if (text.size() < 2) return -1;
  int64_t unit = 0;
  switch (text.back()) {
    case 'm':
      unit = 60;
      break;
    case 'h':
      unit = 3600;
      break;
    case 'd':
      unit = 86'400;
      break;
    default:
      return -1;
  }
  int64_t count = 0;
  const std::string_view number = text.substr(0, text.size() - 1);
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), count);
  if (ec != std::errc() || end != number.data() + number.size() || count < 0 ||
      count > 100 * 366)  // a century of days is more than any database holds
    return -1;
  const int64_t age_ns = count * unit * kNsPerSecond;
  return age_ns > now_ns ? 0 : now_ns - age_ns;
}

int64_t parse_date(std::string_view text) {
  // YYYY-MM-DD, then optionally THH:MM and :SS.
  if (text.size() != 10 && text.size() != 16 && text.size() != 19) return -1;
  std::tm when{};
  const int year = digits(text, 0, 4), month = digits(text, 5, 2), day = digits(text, 8, 2);
  if (year < 1970 || month < 1 || month > 12 || day < 1 || day > 31 || text[4] != '-' ||
      text[7] != '-')
    return -1;
  int hour = 0, minute = 0, second = 0;
  if (text.size() >= 16) {
    hour = digits(text, 11, 2);
    minute = digits(text, 14, 2);
    if (text[10] != 'T' || text[13] != ':' || hour < 0 || hour > 23 || minute < 0 || minute > 59)
      return -1;
  }
  if (text.size() == 19) {
    second = digits(text, 17, 2);
    if (text[16] != ':' || second < 0 || second > 60) return -1;
  }
  when.tm_year = year - 1900;
  when.tm_mon = month - 1;
  when.tm_mday = day;
  when.tm_hour = hour;
  when.tm_min = minute;
  when.tm_sec = second;
  when.tm_isdst = -1;
  const std::tm asked = when;
  const std::time_t seconds = std::mktime(&when);
  // mktime normalises 2026-02-31 into March: such a date does not exist.
  if (seconds == static_cast<std::time_t>(-1) || when.tm_mday != asked.tm_mday ||
      when.tm_mon != asked.tm_mon)
    return -1;
  return static_cast<int64_t>(seconds) * kNsPerSecond;
}

}  // namespace

int64_t parse_since(std::string_view text, int64_t now_ns) {
  if (text.empty()) return -1;
  return text.find('-') == std::string_view::npos ? parse_age(text, now_ns) : parse_date(text);
}

bool parse_usage_arguments(const std::vector<std::string_view>& args, int64_t now_ns,
                           UsageOptions& out, std::string& error) {
  bool json = false, csv = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    const bool takes_value = arg == "--db" || arg == "--since" || arg == "--by";
    if (takes_value && i + 1 == args.size()) {
      error = "usage: " + std::string(arg) + " needs a value (" + kUsageUsage + ")";
      return false;
    }
    if (arg == "--db") {
      out.database = std::string(args[++i]);
      if (out.database.empty()) {
        error = std::string("usage: --db needs a path (") + kUsageUsage + ")";
        return false;
      }
    } else if (arg == "--since") {
      out.since_text = std::string(args[++i]);
      out.since_ns = parse_since(out.since_text, now_ns);
      if (out.since_ns < 0) {
        error = "usage: --since " + out.since_text +
                ": not YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] or an age such as 7d, 12h, 30m";
        return false;
      }
    } else if (arg == "--by") {
      const std::string_view by = args[++i];
      if (by == "user") {
        out.by = usage::GroupBy::kUser;
      } else if (by == "group") {
        out.by = usage::GroupBy::kGroup;
      } else if (by == "tenant") {
        out.by = usage::GroupBy::kTenant;
      } else {
        error = "usage: --by " + std::string(by) + ": not user, group or tenant";
        return false;
      }
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--csv") {
      csv = true;
    } else if (arg == "-h" || arg == "--help") {
      out.help = true;
    } else {
      error = "usage: unknown argument " + std::string(arg) + " (" + kUsageUsage + ")";
      return false;
    }
  }
  if (json && csv) {
    error = std::string("usage: --json and --csv exclude each other (") + kUsageUsage + ")";
    return false;
  }
  out.format = json ? UsageFormat::kJson : csv ? UsageFormat::kCsv : UsageFormat::kTable;
  return true;
}

}  // namespace gpulimit::cli
