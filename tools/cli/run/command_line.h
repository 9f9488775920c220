// gpulimit's command line when its first word names no subcommand (main.cpp):
// the limit flags of the option table, --no-server, --help, --version, and
// the command to run, after `--` or after the last option.
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

  // flag_text as the options library takes it: views valid while this lives.
  options::FlagValues flag_values() const;
};

// False with `error` set to one line on a malformed command line. A missing
// command is an error unless --help or --version asks for none. Every word
// from the command on is the command's: `gpulimit -- status` runs a program
// called status.
bool parse_command_line(int argc, char** argv, Invocation& out, std::string& error);

}  // namespace gpulimit::cli
