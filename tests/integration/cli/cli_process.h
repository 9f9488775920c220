// Runs gpulimit (or any program) to completion with exactly the environment
// a test gives, and keeps what it printed and how it ended.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace integration {

struct CliRun {
  pid_t pid = -1;
  int wait_status = -1;  // as waitpid reports it
  std::string out;
  std::string err;

  bool exited_with(int code) const;
  bool killed_by(int signal) const;
  // Everything a failed assertion should show.
  std::string describe() const;
};

// `environment` is the child's whole environment (NAME=value); `output_dir`
// holds its stdout and stderr; `working_dir`, if not empty, is where it
// starts. Waits as long as the program runs: ctest's timeout is the bound.
CliRun run_program(const std::string& program, const std::vector<std::string>& args,
                   const std::vector<std::string>& environment, const std::string& output_dir,
                   const std::string& working_dir = "");

using Variables = std::map<std::string, std::string>;

// NAME=value lines, as print_environment writes them; the first of a name
// counts, as with getenv.
Variables parse_environment(const std::string& text);

}  // namespace integration
