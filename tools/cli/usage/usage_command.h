// `gpulimit usage`: what the usage database gpulimitd writes (--usage-db)
// says each user, group or tenant used, like sreport: GPU-hours and
// GiB-hours, tenants, peaks and refusals, as a table, JSON or CSV.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/usage/usage_summary.h"
#include "usage/usage_command_line.h"

namespace gpulimit::cli {

// Exit statuses of `gpulimit usage` other than 0.
inline constexpr int kExitNoDatabase = 1;  // missing, unreadable, not a usage database
inline constexpr int kExitUsageUsage = 2;

// The report of `lines` in `options.format`.
std::string render_usage(const std::vector<usage::UsageLine>& lines, const UsageOptions& options);

// `args` are the words after "usage": the report on stdout and 0, or
// --help's page, or one line on stderr and an exit status.
int run_usage(const std::vector<std::string_view>& args, char* const* envp);

}  // namespace gpulimit::cli
