// `gpulimit status [--json]`: the words after "status".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpulimit::cli {

inline constexpr const char* kStatusUsage = "usage: gpulimit status [--json]";

struct StatusOptions {
  bool json = false;  // the server's JSON as it is, instead of tables
  bool help = false;
};

// False with `error` set to one line (naming the usage) on a malformed
// command line.
bool parse_status_arguments(const std::vector<std::string_view>& args, StatusOptions& out,
                            std::string& error);

}  // namespace gpulimit::cli
