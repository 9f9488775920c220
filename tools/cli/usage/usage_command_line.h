// `gpulimit usage [--db PATH] [--since WHEN] [--by user|group|tenant]
// [--json|--csv]`: the words after "usage".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/usage/usage_summary.h"

namespace gpulimit::cli {

inline constexpr const char* kUsageUsage =
    "usage: gpulimit usage [--db PATH] [--since WHEN] [--by user|group|tenant] [--json|--csv]";
inline constexpr const char* kDefaultUsageDatabase = "/var/lib/gpulimit/usage.db";

enum class UsageFormat { kTable, kJson, kCsv };

struct UsageOptions {
  std::string database = kDefaultUsageDatabase;
  int64_t since_ns = 0;    // ns since the epoch; 0: from the first record
  std::string since_text;  // as given, for the report
  usage::GroupBy by = usage::GroupBy::kUser;
  UsageFormat format = UsageFormat::kTable;
  bool help = false;
};

// WHEN: YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS] in local time, or an age: N
// followed by m, h or d (minutes, hours, days before `now_ns`). Returns ns
// since the epoch, or -1 when malformed.
int64_t parse_since(std::string_view text, int64_t now_ns);

// False with `error` set to one line (naming the usage) on a malformed
// command line.
bool parse_usage_arguments(const std::vector<std::string_view>& args, int64_t now_ns,
                           UsageOptions& out, std::string& error);

}  // namespace gpulimit::cli
