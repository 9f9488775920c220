// gpulimit's command line: the limit flags of the option table, --no-server,
// --help, --version, and the command to run, after `--` or after the last
// option; or `status [--json]` as the first argument.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "gpulimit/options/environment.h"

namespace gpulimit::cli {

struct Invocation {
  // The text each flag was given, by OptionId; nullopt for a flag not given.
  std::array<std::optional<std::string>, options::kOptionCount> flag_text;
  std::vector<std::string> command;
  bool help = false;
  bool version = false;
  bool no_server = false;  // run the command without time-slicing
  bool status = false;     // `gpulimit status`: show the server's state
  bool json = false;       // `gpulimit status --json`

  // flag_text as the options library takes it: views valid while this lives.
  options::FlagValues flag_values() const;
};

// False with `error` set to one line on a malformed command line. A missing
// command is an error unless --help, --version or `status` asks for none.
// `status` is the subcommand only as the first argument: `gpulimit --
// status` runs a program called status.
bool parse_command_line(int argc, char** argv, Invocation& out, std::string& error);

}  // namespace gpulimit::cli
