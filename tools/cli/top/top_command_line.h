// `gpulimit top [--interval SECONDS] [--batch] [--iterations N]`: the words
// after "top".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpulimit::cli {

inline constexpr const char* kTopUsage =
    "usage: gpulimit top [--interval SECONDS] [--batch] [--iterations N]";

struct TopOptions {
  std::chrono::milliseconds interval{1000};
  bool batch = false;       // plain text frames on stdout, no terminal needed
  uint64_t iterations = 0;  // frames to show before exiting; 0: until quit
  bool help = false;
};

// False with `error` set to one line (naming the usage) on a malformed
// command line; `out` is then untouched.
bool parse_top_arguments(const std::vector<std::string_view>& args, TopOptions& out,
                         std::string& error);

// "1", "0.5", "2.25": seconds from 0.1 to 3600, to the millisecond. False
// for anything else (signs, exponents, "inf", trailing text).
bool parse_interval(std::string_view text, std::chrono::milliseconds& out);

}  // namespace gpulimit::cli
