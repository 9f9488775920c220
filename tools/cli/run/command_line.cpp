#include "run/command_line.h"

#include <CLI/CLI.hpp>

namespace gpulimit::cli {
namespace {

constexpr const char* kUsage =
    "usage: gpulimit [OPTION...] [--] COMMAND [ARGUMENT...], or gpulimit status [--json]; see "
    "gpulimit --help";

}  // namespace

options::FlagValues Invocation::flag_values() const {
  options::FlagValues values;
  for (std::size_t i = 0; i < flag_text.size(); ++i)
    if (flag_text[i]) values[i] = *flag_text[i];
  return values;
}

bool parse_command_line(int argc, char** argv, Invocation& out, std::string& error) {
  CLI::App app{"", "gpulimit"};
  // The help page is help_text()'s, written as a manual page.
  app.set_help_flag();
  app.add_flag("-h,--help", out.help);
  app.add_flag("--version", out.version);
  app.add_flag("--no-server", out.no_server);

  // Every occurrence is kept, so that a flag given twice is refused here
  // rather than one of its values quietly winning.
  std::array<std::vector<std::string>, options::kOptionCount> given;
  for (const options::OptionSpec& spec : options::kOptionTable) {
    if (spec.flag.empty()) continue;
    app.add_option(std::string(spec.flag), given[static_cast<std::size_t>(spec.id)])
        ->type_name(std::string(spec.metavar))
        ->allow_extra_args(false);
  }
  // Parsing stops at the first argument that is not one of ours: the
  // command and its own arguments are never read as gpulimit's.
  app.prefix_command();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& parse_error) {
    error = parse_error.what();
    return false;
  }

  for (const options::OptionSpec& spec : options::kOptionTable) {
    const std::vector<std::string>& values = given[static_cast<std::size_t>(spec.id)];
    if (values.size() > 1) {
      error = std::string(spec.flag) + " is given twice";
      return false;
    }
    if (values.empty()) continue;
    // CLI11 takes the separator for the value of a flag left without one.
    if (values.front() == "--") {
      error = std::string(spec.flag) + " needs a value (" + std::string(spec.metavar) + ")";
      return false;
    }
    out.flag_text[static_cast<std::size_t>(spec.id)] = values.front();
  }
  if (out.help || out.version) return true;

  std::vector<std::string> rest = app.remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().starts_with('-')) {
    error = "unknown option " + rest.front() + " (" + kUsage + ")";
    return false;
  }
  if (rest.empty()) {
    error = std::string("no command to run (") + kUsage + ")";
    return false;
  }
  out.command = std::move(rest);
  return true;
}

}  // namespace gpulimit::cli
