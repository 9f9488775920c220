// gpulimit-cupti-trace's command line, and the environment it gives the
// traced command. Pure logic, for the unit tests; main.cpp does the I/O.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpulimit::cupti_trace {

inline constexpr std::string_view kUsage =
    "usage: gpulimit-cupti-trace -o FILE [--append] [--] COMMAND [ARGS...]";

struct WrapperOptions {
  std::string output;                // the trace file
  bool append = false;               // keep what the file holds (else emptied first)
  bool help = false;                 // --help: print the help, run nothing
  std::vector<std::string> command;  // COMMAND ARGS...
};

struct WrapperParse {
  std::optional<WrapperOptions> options;  // none: `error` says why
  std::string error;
};

// `arguments` without the program's name. Options come before the command;
// the first argument that is not one (or everything after "--") is it.
WrapperParse parse_wrapper_arguments(std::span<const std::string_view> arguments);

// LD_PRELOAD for the command: the entries of `current` (split as the loader
// splits it, on spaces and colons) with `library` appended, so that an
// interposer such as libgpulimit.so stays first, and no second copy of the
// tracer (an entry naming a file called libgpulimit-cupti-trace.so).
std::string preload_with_tracer(std::string_view current, std::string_view library);

// The help text of --help.
std::string_view help_text();

}  // namespace gpulimit::cupti_trace
