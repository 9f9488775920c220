// Parsing of gpulimit-trace's option values. Numbers are taken as text and
// parsed here because CLI11 silently saturates an out-of-range integer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpulimit/trace/analysis.h"

namespace gpulimit::trace::cli {

// A decimal in [0, max]. On failure returns false and sets `error` to one
// line naming `option`.
bool parse_non_negative(std::string_view option, std::string_view text, std::int64_t max,
                        std::int64_t& out, std::string& error);

// The --tenant arguments, each "NAME=PID,PID...", into one map. A tenant named
// twice, or a pid in two tenants, is an error: either would count time twice.
bool parse_tenants(const std::vector<std::string>& arguments, TenantMap& out, std::string& error);

}  // namespace gpulimit::trace::cli
