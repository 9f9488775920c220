// Starting the job: gpulimit becomes the command, so that the command keeps
// its pid, and its exit status and signals reach gpulimit's caller as they
// would without gpulimit.
#pragma once

#include <string>
#include <vector>

namespace gpulimit::cli {

// Shell exit statuses for a command that could not be started.
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitNotFound = 127;

// Replaces this process with `command`, looked up in PATH as a shell looks
// it up, in `environment` (NAME=value entries). Returns only when that
// fails: 127 when there is no such command, 126 when it cannot be run, with
// `error` set to one line.
int run_command(const std::vector<std::string>& command,
                const std::vector<std::string>& environment, std::string& error);

}  // namespace gpulimit::cli
