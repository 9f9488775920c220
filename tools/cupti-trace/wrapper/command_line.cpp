#include "command_line.h"

namespace gpulimit::cupti_trace {
namespace {

constexpr std::string_view kLibraryName = "libgpulimit-cupti-trace.so";

bool names_tracer(std::string_view entry) {
  const std::size_t slash = entry.rfind('/');
  return entry.substr(slash == std::string_view::npos ? 0 : slash + 1) == kLibraryName;
}

}  // namespace

WrapperParse parse_wrapper_arguments(std::span<const std::string_view> arguments) {
  WrapperOptions options;
  bool have_output = false;
  std::size_t i = 0;
  for (; i < arguments.size(); ++i) {
    const std::string_view argument = arguments[i];
    if (argument == "--") {
      ++i;
      break;
    }
    if (argument == "-h" || argument == "--help") {
      options.help = true;
      return {.options = options, .error = {}};
    }
    if (argument == "--append") {
      options.append = true;
      continue;
    }
    if (argument == "-o" || argument == "--output") {
      if (i + 1 == arguments.size() || arguments[i + 1].empty())
        return {.options = std::nullopt, .error = std::string(argument) + " needs a FILE"};
      if (have_output) return {.options = std::nullopt, .error = "the trace file is given twice"};
      options.output = std::string(arguments[++i]);
      have_output = true;
      continue;
    }
    if (argument.starts_with("-") && argument.size() > 1)
      return {.options = std::nullopt, .error = "unknown option " + std::string(argument)};
    break;
  }
  if (!have_output) return {.options = std::nullopt, .error = "no trace file: give -o FILE"};
  for (; i < arguments.size(); ++i)
    options.command.emplace_back(arguments[i]);
  if (options.command.empty() || options.command.front().empty())
    return {.options = std::nullopt, .error = "no command to run"};
  return {.options = options, .error = {}};
}

std::string preload_with_tracer(std::string_view current, std::string_view library) {
  std::string result;
  while (!current.empty()) {
    const std::size_t end = current.find_first_of(": ");
    const std::string_view entry = current.substr(0, end);
    if (!entry.empty() && !names_tracer(entry)) {
      result += entry;
      result += ':';
    }
    if (end == std::string_view::npos) break;
    current.remove_prefix(end + 1);
  }
  result += library;
  return result;
}

std::string_view help_text() {
  return R"(usage: gpulimit-cupti-trace -o FILE [--append] [--] COMMAND [ARGS...]

Runs COMMAND with libgpulimit-cupti-trace.so preloaded: every kernel that
COMMAND and the processes it starts run on an NVIDIA GPU is recorded with
CUPTI and appended to FILE as one line
    <pid> <device> <stream> <start_ns> <end_ns> <name>
(gpulimit's kernel-trace format: physical device index, CLOCK_MONOTONIC
nanoseconds). Read it with gpulimit-trace FILE.

  -o, --output FILE  the trace file; emptied first, unless --append
  --append           add to FILE instead
  -h, --help         this text

CUPTI takes one client per process: do not combine with the PyTorch
profiler, Nsight Systems or another CUPTI tool in the same process.

Environment:
  GPULIMIT_CUPTI_TRACE_LIBRARY   the library to preload, instead of the one
                                 beside this program (or in ../lib)
  GPULIMIT_CUPTI_TRACE_FLUSH_MS  how often each process writes what it has
                                 recorded (default 1000; 0: at exit only)

Exit status: COMMAND's; 2 for a wrong command line, 1 when the library or
FILE cannot be used, 126/127 when COMMAND cannot be run or is not found.
)";
}

}  // namespace gpulimit::cupti_trace
